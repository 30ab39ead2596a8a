/* vk_op_attention.c — host side of the fused relative-position attention: one dispatch, no scratch
 * (memory linear in T). Chooses the scalar kernel (attention.comp), the barrier-free one for CPU
 * drivers (attention_rows.comp) or, for f16 products on NV cooperative matrices, attention_coopmat.comp
 * by head width; records any configuration, the lab's included (vk_attention.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vk_attention.h"
#include "vk_lab.h"

struct pc_attention {
    uint64_t q, k, v, p, bu, bv, y;
    uint32_t Tq, Tk, q0, k0, D, dk, P, n_valid, w; /* heads = D / dk and p's centre (P - 1) / 2 are derived */
    float scale;
    uint32_t flags, nseg;
    uint64_t seg;
    uint32_t chunk, lchunks; /* the chunked_limited mask (chunk 0: off) */
    uint64_t qpos;           /* query positions from a table (attention_rows.comp only) */
};
_Static_assert(sizeof(struct pc_attention) <= VK_PUSH_CONSTANT_BYTES,
               "mirror of shaders/common/attention.glsl's push constants, within the guaranteed 128 bytes");

#define ATT_FLAG_VEC 1u  /* D, dk multiples of 4 and q, k, v, p 16-byte aligned: 16-byte f32 loads  */
#define ATT_FLAG_VEC8 2u /* D, dk multiples of 8 and q, k, v, p 16-byte aligned: 16-byte f16 loads  */
/* Tensor types (specialization constant 7 of every attention kernel, shaders/common/attention.glsl). */
#define ATT_TYPE_Q16 1u
#define ATT_TYPE_K16 2u
#define ATT_TYPE_V16 4u
#define ATT_TYPE_P16 8u
#define ATT_TYPE_Y16 16u

/* Scalar kernel (attention.comp): 128 invocations, 32 query rows, dk in chunks of 32 with up to 8
 * chunks of output registers. */
#define ATT_SCALAR_SHARED 25596u

/* The kernels production can pick; the emulated twins and the kernels the choice took before are the
 * lab's (tests/vk_lab.c). */
static const struct vk_att_cfg configs[] = {
    {.name = "scalar", .prof = "relpos_attention", .kind = VK_ATT_SCALAR, .spv = SPV_attention,
     .spv_h = SPV_attention_h, .wg = 128, .bq = 32, .max_dk = 256, .shared_bytes = ATT_SCALAR_SHARED},
    /* attention_rows.comp: 8 query rows per workgroup, one per invocation, no shared memory */
    {.name = "rows", .prof = "relpos_attention", .kind = VK_ATT_ROWS, .spv = SPV_attention_rows,
     .spv_h = SPV_attention_rows_h, .wg = 8, .bq = 8, .max_dk = 256, .shared_bytes = 0},
    /* attention_rows_group.comp: a (row, head) per workgroup of 32, the head width over the lanes */
    {.name = "rows_group", .prof = "relpos_attention", .kind = VK_ATT_ROWS_GROUP, .spv = SPV_attention_rows_group,
     .spv_h = SPV_attention_rows_group_h, .wg = 32, .bq = 1, .max_dk = 256, .shared_bytes = (32 * 33 + 32) * 4},
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    ATT_COOPMAT("cm_dk32", VK_ATT_COOPMAT, SPV_attention_cm_dk32, 4, 32),
    ATT_COOPMAT_SPLIT_SHUFFLE("cms4xqm_dk64", VK_ATT_COOPMAT, SPV_attention_cms4xqm_dk64, 4, 64),
    ATT_COOPMAT_SPLIT_SHUFFLE("cms8xqmb_dk128", VK_ATT_COOPMAT, SPV_attention_cms8xqmb_dk128, 8, 128),
#endif
};

/* The tensor-core kernel for the op's f16 mode per head width, narrowest first: the first entry that
 * takes dk and can run here. From tools/gpu/attention_sweep.sh (docs/gpu-results.md, "Attention").
 * By head width only, never by length: a sequence's row chunks must take one kernel to stay
 * bit-identical to one call (test_ops_attention's choice cases name the expected entries). */
static const struct {
    int64_t max_dk;
    const char *name;
} tc_choice[] = {
    {32, "cm_dk32"},
    {64, "cms4xqm_dk64"},
    {128, "cms8xqmb_dk128"},
};

const struct vk_att_cfg *vk_att_configs(size_t *n) {
    const struct vk_lab *lab = vk_lab_get();
    if (lab && lab->att) {
        *n = lab->natt;
        return lab->att;
    }
    *n = sizeof configs / sizeof *configs;
    return configs;
}

const struct vk_att_cfg *vk_att_find(const char *name) {
    size_t n;
    const struct vk_att_cfg *c = vk_att_configs(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(c[i].name, name) == 0)
            return &c[i];
    return NULL;
}

bool vk_att_cfg_tensor_cores(const struct vk_att_cfg *c) {
    return c->kind == VK_ATT_COOPMAT || c->kind == VK_ATT_COOPMAT_EMU;
}

bool vk_att_cfg_usable(const struct vk_att_cfg *c, const struct vk_caps *caps) {
    if (c->wg > caps->max_wg_invocations || c->shared_bytes > caps->max_shared)
        return false;
    if (vk_att_cfg_tensor_cores(c) && !caps->f16)
        return false;
    /* The real kernels map one 32-invocation subgroup to each 16-row slice (gl_SubgroupID). */
    if (c->kind == VK_ATT_COOPMAT && (!caps->coopmat_nv || caps->subgroup_size != 32))
        return false;
    /* ROW_SHUFFLE: a row's invocations are adjacent lanes of one subgroup */
    if (c->row_lanes && (!caps->shuffle || caps->subgroup_size < c->row_lanes))
        return false;
    return true;
}

const struct vk_att_cfg *vk_att_override(const struct vk_caps *caps, const struct logger *lg) {
    const char *s = getenv("VKASR_ATTENTION_KERNEL");
    if (!s || !*s)
        return NULL;
    const struct vk_att_cfg *cfg = vk_att_find(s);
    if (!cfg)
        LOG_WARN(lg, "VKASR_ATTENTION_KERNEL=%s ignored: no attention kernel has that name", s);
    else if (!vk_att_cfg_usable(cfg, caps))
        LOG_WARN(lg, "VKASR_ATTENTION_KERNEL=%s ignored: this device cannot run it", s);
    else
        return cfg;
    return NULL;
}

const struct vk_att_cfg *vk_att_choose(const struct vk_caps *caps, const struct vk_att_cfg *force, int64_t dk,
                                       bool f16) {
    /* the override: a tensor-core kernel only where the op allows f16 products */
    if (force && dk <= (int64_t)force->max_dk && (f16 || !vk_att_cfg_tensor_cores(force)))
        return force;
    /* A CPU driver: the barrier-free kernel (no tensor cores there). */
    if (caps->cpu) {
        const struct vk_att_cfg *r = vk_att_find("rows");
        if (r && dk <= (int64_t)r->max_dk && vk_att_cfg_usable(r, caps))
            return r;
    }
    if (f16) {
        for (size_t i = 0; i < sizeof tc_choice / sizeof *tc_choice; i++) {
            const struct vk_att_cfg *c = vk_att_find(tc_choice[i].name);
            if (c && dk <= tc_choice[i].max_dk && dk <= (int64_t)c->max_dk && vk_att_cfg_usable(c, caps))
                return c;
        }
    }
    const struct vk_att_cfg *s = vk_att_find("scalar");
    return dk <= (int64_t)s->max_dk && vk_att_cfg_usable(s, caps) ? s : NULL;
}

static bool overlaps(const be_tensor *a, const be_tensor *b) {
    uint64_t na = be_nbytes(a), nb = be_nbytes(b);
    return na && nb && a->addr < b->addr + nb && b->addr < a->addr + na;
}

vkasr_status vk_att_record(struct vk_backend *b, const struct op_relpos_attention *a, const struct vk_att_cfg *cfg) {
    struct err *e = &b->base.err;
    struct vk_device *d = b->d;
    int64_t Tq = a->q.ne[0], Tk = a->k.ne[0], D = a->q.ne[1], H = a->heads, dk = D / H, P = a->p.ne[0];
    if (Tq == 0 || D == 0)
        return VKASR_OK;
    if (dk > (int64_t)cfg->max_dk)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "relpos_attention: head width dk = %lld (D = %lld / heads = %lld) exceeds the limit of the "
                       "Vulkan kernel %s (%u)",
                       (long long)dk, (long long)D, (long long)H, cfg->name, cfg->max_dk);
    if (!vk_att_cfg_usable(cfg, &d->caps))
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "relpos_attention: kernel %s cannot run on this device (needs %u bytes of shared memory and "
                       "%u invocations per workgroup; the device offers %u and %u%s)",
                       cfg->name, cfg->shared_bytes, cfg->wg, d->caps.max_shared, d->caps.max_wg_invocations,
                       cfg->kind == VK_ATT_COOPMAT
                           ? "; needs NV cooperative matrices, subgroup size 32"
                       : vk_att_cfg_tensor_cores(cfg) ? "; needs f16"
                                                      : "");
    uint32_t types = 0;
    types |= a->q.type == BE_F16 ? ATT_TYPE_Q16 : 0;
    types |= a->k.type == BE_F16 ? ATT_TYPE_K16 : 0;
    types |= a->v.type == BE_F16 ? ATT_TYPE_V16 : 0;
    types |= a->p.type == BE_F16 ? ATT_TYPE_P16 : 0;
    types |= a->y.type == BE_F16 ? ATT_TYPE_Y16 : 0;
    if (types && !d->caps.f16)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "relpos_attention: f16 tensors need shaderFloat16 and 16-bit storage, which this device lacks");
    /* The kernels index rows and positions in 32 bits (offsets are 64-bit), form center - i + j in int
     * and sums of two positions in uint. */
    const int64_t lim = INT32_MAX / 4;
    if (a->q_pos0 + Tq > lim || a->k_pos0 + Tk > lim || P > lim || D > INT32_MAX)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "relpos_attention: q [%lld, %lld] at position %lld, k [%lld rows] at %lld, p [%lld rows]: too "
                       "large for the kernel's 32-bit indices",
                       (long long)Tq, (long long)D, (long long)a->q_pos0, (long long)Tk, (long long)a->k_pos0,
                       (long long)P);
    /* llvmpipe stops an invocation's loops after 65535 iterations in total without an error
     * (attention_rows.comp): one row's keys stay below that, else the result would silently be wrong;
     * rows whose loops over dk would reach it get the unrolled variant. */
    int64_t row_keys = Tk, band = a->window > 0 ? 2 * a->window + 1 : a->chunk > 0 ? a->chunk * (a->left_chunks + 1) : Tk;
    row_keys = row_keys < band ? row_keys : band;
    /* 16-byte loads of 4 elements (ATT_FLAG_VEC; attention_rows' VEC4, spec 2, whose loops over dk then
     * take dk / 4) */
    const bool aligned = a->q.addr % 16 == 0 && a->k.addr % 16 == 0 && a->v.addr % 16 == 0 && a->p.addr % 16 == 0;
    const bool vec = D % 4 == 0 && dk % 4 == 0 && aligned, vec4 = cfg->kind == VK_ATT_ROWS && vec;
    const bool unroll = cfg->kind == VK_ATT_ROWS && (row_keys + 1) * 3 * (vec4 ? dk / 4 : dk) >= 60000;
    /* (attention_rows_group.comp's lanes count about 4 loop iterations a key) */
    const bool per_row = cfg->kind == VK_ATT_ROWS || cfg->kind == VK_ATT_ROWS_GROUP;
    if (per_row && (cfg->kind == VK_ATT_ROWS || d->caps.cpu)) {
        const int max_keys = cfg->kind == VK_ATT_ROWS ? VK_ATT_ROWS_MAX_KEYS : VK_ATT_ROWS_MAX_KEYS / 4;
        if (row_keys > max_keys)
            return err_set(e, VKASR_ERR_UNSUPPORTED,
                           "relpos_attention: %lld keys per query row on a CPU driver, whose loops stop after 65535 "
                           "iterations (at most %d keys for kernel %s: about %d minutes of full attention); use "
                           "local attention",
                           (long long)row_keys, max_keys, cfg->name, max_keys * 8 / 100 / 60);
    }
    /* Every output row reads all keys and position rows of its head: y may not overlap any input. */
    const be_tensor *in[] = {&a->q, &a->k, &a->v, &a->p, &a->bias_u, &a->bias_v, &a->seg, &a->q_pos};
    static const char *const in_name[] = {"q", "k", "v", "p", "bias_u", "bias_v", "seg", "q_pos"};
    const int nin = a->seg.addr ? 7 : 6;
    for (int i = 0; i < nin; i++)
        if (overlaps(&a->y, in[i]))
            return err_set(e, VKASR_ERR_INVALID_ARG, "relpos_attention: y must not overlap %s", in_name[i]);
    if (a->q_pos.addr && !per_row)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "relpos_attention: query positions from a table need the rows or rows_group kernel");

    /* window 0 (full) and windows wider than the positions in play are the same band. */
    int64_t span = a->q_pos0 + Tq > a->k_pos0 + Tk ? a->q_pos0 + Tq : a->k_pos0 + Tk;
    int64_t w = a->window > 0 && a->window < span ? a->window : span;
    int64_t n_valid = a->n_valid < span ? a->n_valid : span;
    uint32_t flags = 0;
    if (vec)
        flags |= ATT_FLAG_VEC;
    if (D % 8 == 0 && dk % 8 == 0 && aligned)
        flags |= ATT_FLAG_VEC8;
    struct pc_attention pc = {
        .q = a->q.addr,
        .k = a->k.addr,
        .v = a->v.addr,
        .p = a->p.addr,
        .bu = a->bias_u.addr,
        .bv = a->bias_v.addr,
        .y = a->y.addr,
        .Tq = (uint32_t)Tq,
        .Tk = (uint32_t)Tk,
        .q0 = (uint32_t)a->q_pos0,
        .k0 = (uint32_t)a->k_pos0,
        .D = (uint32_t)D,
        .dk = (uint32_t)dk,
        .P = (uint32_t)P,
        .n_valid = (uint32_t)n_valid,
        .w = (uint32_t)w,
        .scale = (float)(1.0 / sqrt((double)dk)),
        .flags = flags,
        .nseg = a->seg.addr ? (uint32_t)(a->seg.ne[0] - 1) : 0,
        .seg = a->seg.addr,
        .chunk = (uint32_t)a->chunk,
        .lchunks = (uint32_t)(a->left_chunks < span ? a->left_chunks : span),
        .qpos = a->q_pos.addr,
    };
    /* Spec 1: the scalar kernel's number of 32-wide dk chunks of output registers; attention_rows'
     * head width when its loops over it must be unrolled, else 0; the tensor-core kernels take none.
     * Spec 2: attention_rows' VEC4. Spec 3: the chunked mask is on (its tests compiled in). Spec 7: the
     * tensor types (ids 4-6 are unused). */
    uint32_t spec[8] = {cfg->wg, cfg->kind == VK_ATT_ROWS ? (unroll ? (uint32_t)dk : 0u) : (uint32_t)((dk + 31) / 32),
                        vec4 ? 1u : 0u, pc.chunk != 0u ? 1u : 0u, 0, 0, 0, types};
    uint64_t qblocks = ((uint64_t)Tq + cfg->bq - 1) / cfg->bq;
    struct vk_range rd[8], wr[1] = {vk_tensor_range(&a->y)};
    for (int i = 0; i < nin; i++)
        rd[i] = vk_tensor_range(in[i]);
    if (a->q_pos.addr)
        rd[nin] = vk_tensor_range(&a->q_pos);
    struct vk_dispatch dp = {
        .name = cfg->prof,
        .spv = types ? cfg->spv_h : cfg->spv,
        .spec = spec,
        .nspec = 8,
        .pc = &pc,
        .pc_size = sizeof pc,
        .groups = {vk_groups_dim(d, 0, qblocks, 1), vk_groups_dim(d, 1, (uint64_t)H, 1), 1},
        .reads = rd,
        .nreads = (uint32_t)(nin + (a->q_pos.addr ? 1 : 0)),
        .writes = wr,
        .nwrites = 1,
    };
    if (!per_row)
        return vk_record(b, &dp);
    /* attention_rows.comp (a row per invocation) and attention_rows_group.comp (a row per workgroup)
     * take their rows from row0 (in the flags word): one dispatch per grid's worth of rows. */
    for (uint64_t r0 = 0; r0 < (uint64_t)Tq; r0 += (uint64_t)dp.groups[0] * cfg->bq) {
        pc.flags = (uint32_t)r0;
        TRY(vk_record(b, &dp));
    }
    return VKASR_OK;
}

vkasr_status vk_op_relpos_attention(struct vk_backend *b, const struct op_relpos_attention *a) {
    int64_t Tq = a->q.ne[0], D = a->q.ne[1], dk = D / a->heads;
    if (Tq == 0 || D == 0)
        return VKASR_OK;
    if (!b->att_force_read) { /* a backend runs on one thread at a time: no race */
        b->att_force = vk_att_override(&b->d->caps, b->d->base.log);
        b->att_force_read = true;
    }
    /* query positions from a table (the streaming session's batches): a kernel that takes a position
     * per row, whose keys are the chunked mask's few: on a CPU driver the barrier-free rows kernel, on a
     * GPU a workgroup per row (the rows kernel's serial walk over keys and head width takes 0.6 ms a
     * layer there); VKASR_ATTENTION_KERNEL may name either. By device only, never by the number of
     * rows: a stream's results must not depend on who shares its step. */
    const struct vk_att_cfg *cfg;
    if (a->q_pos.addr)
        cfg = b->att_force && (b->att_force->kind == VK_ATT_ROWS || b->att_force->kind == VK_ATT_ROWS_GROUP)
                  ? b->att_force
                  : vk_att_find(b->d->caps.cpu ? "rows" : "rows_group");
    else
        cfg = vk_att_choose(&b->d->caps, b->att_force, dk, a->f16);
    if (!cfg) {
        const struct vk_att_cfg *s = vk_att_find("scalar");
        if (dk > (int64_t)s->max_dk)
            return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED,
                           "relpos_attention: head width dk = %lld (D = %lld / heads = %d) exceeds the Vulkan "
                           "kernel's limit of %u",
                           (long long)dk, (long long)D, a->heads, s->max_dk);
        cfg = s; /* vk_att_record names what the device lacks */
    }
    return vk_att_record(b, a, cfg);
}
