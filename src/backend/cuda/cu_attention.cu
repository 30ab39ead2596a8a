/* cu_attention.cu — the fused relative-position attention on CUDA (ops.h op_relpos_attention: the
 * formula, types and row-chunk rule). A block owns query rows of one head (grid-stride), stages key
 * tiles, their value rows and the position rows they need in shared memory, and keeps the softmax
 * state in registers; a packed batch runs the key loop once per segment its rows reach, the other rows
 * masked and left exactly unchanged.
 *   att_f32: exact f32, a warp per 4 query rows, lanes split the head width (dk <= 256), a row's keys
 *     one at a time in position order; with the f16 flag it rounds its inputs as the reference does.
 *   att_tc: tensor cores (mma.sync m16n8k16) for the f16 flag and dk <= 128, a warp per 16 query rows:
 *     AC and the position term over the 16 + BK window rows, shifted through shared memory (row r, key
 *     column c uses window column c - r + 15), then P V with f16 weights. Key tiles start at multiples
 *     of BK of the key position, so a tile holding none of a row's keys leaves the row unchanged.
 *   att_qpos: queries at positions from a table (a streaming step), a warp per row and head.
 * Long f16 sequences take cuBLASLt products instead (cu_attention_gemm.cu, by a rule fixed per sequence). */
#include <math.h>
#include <string.h>

#include "cu_internal.h"
#include <cuda_fp16.h>

struct att_args {
    const void *q, *k, *v, *p; /* f32 or f16: q16 .. p16                                                   */
    const float *u, *bv;
    void *y;                   /* f32 or f16: y16                                                          */
    bool q16, k16, v16, p16, y16;
    int64_t Tq, Tk, q0, k0; /* rows of q (positions q0 ..) and of k, v (positions k0 ..)                 */
    int64_t nvq;            /* rows of q at valid positions (below n_valid): the rest get zeros          */
    int64_t kend;           /* key positions present and valid: [k0, kend)                               */
    int64_t D, P, window, center;
    int H, dk;
    float scale;
    bool f16;
    bool vec; /* D, dk multiples of 4 and q, k, v, p 16-byte aligned: 4-element loads (float4, or 8 bytes of f16) */
    const int64_t *seg; /* a packed batch's segment starts [nseg + 1], or nseg 0 */
    int64_t nseg;
    int64_t chunk, lchunks; /* the chunked_limited mask (ops.h); chunk 0: off */
};

/* The segment passes of a block of q's rows [i0, i0 + rows): a pass takes the rows [ilo, ihi) whose
 * positions lie in segment sg ([slo, shi) of positions). seg_first sets up the first pass (a block without
 * valid rows gets one pass without rows); seg_next the next one (false after the last). */
struct seg_pass {
    int64_t ilo, ihi, iend, slo, shi, sg;
};

static __device__ __forceinline__ void seg_bounds(const att_args &a, seg_pass *p) {
    p->slo = 0;
    p->shi = INT64_MAX;
    if (a.nseg) {
        const int64_t pos = a.q0 + p->ilo;
        p->slo = a.seg[p->sg] < pos ? a.seg[p->sg] : pos; /* clamped: a bad table stays harmless */
        if (p->sg + 1 < a.nseg)
            p->shi = a.seg[p->sg + 1] > pos ? a.seg[p->sg + 1] : pos + 1;
    }
    p->ihi = p->shi - a.q0 < p->iend ? p->shi - a.q0 : p->iend;
}

static __device__ __forceinline__ void seg_first(const att_args &a, int64_t i0, int64_t rows, seg_pass *p) {
    p->iend = i0 + rows < a.nvq ? i0 + rows : a.nvq;
    if (p->iend < i0)
        p->iend = i0;
    p->ilo = i0;
    p->sg = a.nseg && i0 < p->iend ? cu_seg_find(a.seg, a.nseg, a.q0 + i0) : 0;
    seg_bounds(a, p);
}

static __device__ __forceinline__ bool seg_next(const att_args &a, seg_pass *p) {
    if (p->ihi >= p->iend)
        return false;
    p->ilo = p->ihi;
    p->sg++;
    seg_bounds(a, p);
    return true;
}

/* The chunked_limited mask's keys of query position pi in a segment starting at slo: [lo, hi). */
static __device__ __forceinline__ int64_t chunk_lo(const att_args &a, int64_t pi, int64_t slo) {
    const int64_t c = (pi - slo) / a.chunk;
    return slo + a.chunk * (c > a.lchunks ? c - a.lchunks : 0);
}
static __device__ __forceinline__ int64_t chunk_hi(const att_args &a, int64_t pi, int64_t slo) {
    return slo + a.chunk * ((pi - slo) / a.chunk + 1);
}
static __device__ __forceinline__ bool chunk_ok(const att_args &a, int64_t pi, int64_t j, int64_t slo) {
    return a.chunk <= 0 || (j >= chunk_lo(a, pi, slo) && j < chunk_hi(a, pi, slo));
}

/* The key positions the rows of a segment pass may see: [*lo, *hi) (empty when it has no rows). */
static __device__ __forceinline__ void key_range(const att_args &a, const seg_pass &p, int64_t *lo, int64_t *hi) {
    *lo = a.k0 > p.slo ? a.k0 : p.slo;
    *hi = a.kend < p.shi ? a.kend : p.shi;
    if (p.ilo >= p.ihi) {
        *hi = *lo;
        return;
    }
    if (a.window > 0) {
        const int64_t first = a.q0 + p.ilo - a.window, last = a.q0 + p.ihi + a.window; /* positions */
        *lo = first > *lo ? first : *lo;
        *hi = last < *hi ? last : *hi;
    }
    if (a.chunk > 0) {
        const int64_t first = chunk_lo(a, a.q0 + p.ilo, p.slo), last = chunk_hi(a, a.q0 + p.ihi - 1, p.slo);
        *lo = first > *lo ? first : *lo;
        *hi = last < *hi ? last : *hi;
    }
}

static __device__ __forceinline__ float round16(float x, bool f16) { return f16 ? __half2float(__float2half_rn(x)) : x; }

/* Element i of an f32 or f16 tensor, as f32. */
static __device__ __forceinline__ float ld(const void *t, int64_t i, bool h16) {
    return h16 ? __half2float(((const __half *)t)[i]) : ((const float *)t)[i];
}

/* Elements i .. i+3 (i a multiple of 4, the tensor 16-byte aligned: 8-byte loads of f16). */
static __device__ __forceinline__ float4 ld4(const void *t, int64_t i, bool h16) {
    if (!h16)
        return *(const float4 *)((const float *)t + i);
    const uint2 u = *(const uint2 *)((const __half *)t + i);
    __half2 a, b;
    memcpy(&a, &u.x, 4);
    memcpy(&b, &u.y, 4);
    const float2 fa = __half22float2(a), fb = __half22float2(b);
    return make_float4(fa.x, fa.y, fb.x, fb.y);
}

/* y[i] = x in y's type. */
static __device__ __forceinline__ void st(void *t, int64_t i, float x, bool h16) {
    if (h16)
        ((__half *)t)[i] = __float2half_rn(x);
    else
        ((float *)t)[i] = x;
}

/* ---- f32 -------------------------------------------------------------------------------------- */

#define AF_WARPS 4
#define AF_ROWS 4                  /* query rows per warp */
#define AF_BQ (AF_WARPS * AF_ROWS) /* query rows per block */
#define AF_BK 32                   /* keys per staged tile */
#define AF_NWIN (AF_BQ + AF_BK)    /* position rows staged per tile (one spare) */

static size_t af_smem(int dk) { return (size_t)(2 * AF_BK + AF_NWIN) * (size_t)dk * sizeof(float); }

/* rows [row0, row0 + n) of a [rows, D] tensor, head columns [hoff, hoff + dk), into dst [n][dk]; rows
 * outside [lo, hi) as zeros. */
static __device__ void af_stage(float *dst, const void *src, bool h16, int64_t row0, int n, int64_t lo, int64_t hi,
                                int64_t D, int64_t hoff, int dk, bool f16) {
    for (int idx = threadIdx.x; idx < n * dk; idx += blockDim.x) {
        int r = idx / dk, d = idx - r * dk;
        int64_t row = row0 + r;
        dst[idx] = row >= lo && row < hi ? round16(ld(src, row * D + hoff + d, h16), f16) : 0.0f;
    }
}

template <int NE> static __global__ void __launch_bounds__(32 * AF_WARPS) att_f32_kernel(att_args a) {
    extern __shared__ float af_sm[];
    const int dk = a.dk, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float *Ks = af_sm, *Vs = Ks + AF_BK * dk, *Ws = Vs + AF_BK * dk;
    const int64_t nqb = (a.Tq + AF_BQ - 1) / AF_BQ, items = nqb * a.H;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int h = (int)(item % a.H);
        const int64_t i0 = item / a.H * AF_BQ, hoff = (int64_t)h * dk;
        float qu[AF_ROWS][NE], qv[AF_ROWS][NE], o[AF_ROWS][NE], m[AF_ROWS], l[AF_ROWS];
#pragma unroll
        for (int r = 0; r < AF_ROWS; r++) {
            int64_t i = i0 + warp * AF_ROWS + r;
            m[r] = -INFINITY;
            l[r] = 0.0f;
#pragma unroll
            for (int e = 0; e < NE; e++) {
                int d = lane + 32 * e;
                bool in = i < a.Tq && d < dk;
                float x = in ? ld(a.q, i * a.D + hoff + d, a.q16) : 0.0f;
                qu[r][e] = in ? round16(x + a.u[hoff + d], a.f16) : 0.0f;
                qv[r][e] = in ? round16(x + a.bv[hoff + d], a.f16) : 0.0f;
                o[r][e] = 0.0f;
            }
        }
        seg_pass sp;
        seg_first(a, i0, AF_BQ, &sp);
        do {
        int64_t jlo, jhi;
        key_range(a, sp, &jlo, &jhi);
        for (int64_t j0 = jlo; j0 < jhi; j0 += AF_BK) {
            /* window row wr holds position row nbase + wr; score (i, j) (i a row of q, j a key position)
             * uses nbase + (i0 + BQ-1 - i) + (j - j0) = center - (q0 + i - j) */
            const int64_t nbase = a.center - (a.q0 + i0 + AF_BQ - 1) + j0;
            __syncthreads(); /* the previous tile is consumed */
            /* key position j is row j - k0 of k and v */
            af_stage(Ks, a.k, a.k16, j0 - a.k0, AF_BK, 0, a.kend - a.k0, a.D, hoff, dk, a.f16);
            af_stage(Vs, a.v, a.v16, j0 - a.k0, AF_BK, 0, a.kend - a.k0, a.D, hoff, dk, a.f16);
            af_stage(Ws, a.p, a.p16, nbase, AF_NWIN, 0, a.P, a.D, hoff, dk, a.f16);
            __syncthreads();
            const int nk = jhi - j0 < AF_BK ? (int)(jhi - j0) : AF_BK;
#pragma unroll
            for (int r = 0; r < AF_ROWS; r++) {
                const int64_t i = i0 + warp * AF_ROWS + r, pi = a.q0 + i;
                if (i < sp.ilo || i >= sp.ihi) /* warp-uniform: rows of other passes, padding */
                    continue;
                for (int jj = 0; jj < nk; jj++) {
                    const int64_t j = j0 + jj;
                    if ((a.window > 0 && (pi - j > a.window || j - pi > a.window)) || !chunk_ok(a, pi, j, sp.slo))
                        continue;
                    const float *kr = Ks + jj * dk, *wr = Ws + (int)(i0 + AF_BQ - 1 - i + jj) * dk;
                    float part = 0.0f;
#pragma unroll
                    for (int e = 0; e < NE; e++) {
                        int d = lane + 32 * e;
                        if (d < dk)
                            part = fmaf(qu[r][e], kr[d], fmaf(qv[r][e], wr[d], part));
                    }
                    const float s = cu_warp_sum(part) * a.scale; /* identical in every lane */
                    if (s > m[r]) {
                        const float c = expf(m[r] - s);
                        l[r] *= c;
#pragma unroll
                        for (int e = 0; e < NE; e++)
                            o[r][e] *= c;
                        m[r] = s;
                    }
                    const float w = expf(s - m[r]);
                    l[r] += w;
                    const float *vr = Vs + jj * dk;
#pragma unroll
                    for (int e = 0; e < NE; e++) {
                        int d = lane + 32 * e;
                        if (d < dk)
                            o[r][e] = fmaf(w, vr[d], o[r][e]);
                    }
                }
            }
        }
        } while (seg_next(a, &sp));
#pragma unroll
        for (int r = 0; r < AF_ROWS; r++) {
            const int64_t i = i0 + warp * AF_ROWS + r;
            if (i >= a.Tq)
                continue;
            /* a valid row sees its own position at least (ops.c), so l > 0 there */
            const float inv = i < a.nvq ? 1.0f / l[r] : 0.0f;
#pragma unroll
            for (int e = 0; e < NE; e++) {
                int d = lane + 32 * e;
                if (d < dk)
                    st(a.y, i * a.D + hoff + d, i < a.nvq ? o[r][e] * inv : 0.0f, a.y16);
            }
        }
    }
}

/* ---- tensor cores ----------------------------------------------------------------------------- */

#define TC_WARPS 4
#define TC_BQ (16 * TC_WARPS) /* query rows per block                                     */
#define TC_BK 32              /* keys per tile                                            */
#define TC_NWIN (TC_BQ + TC_BK) /* ring of position rows (BQ + BK - 1 used, one spare)     */
#define TC_BDW (TC_BK + 16)   /* window columns of a warp's position product               */
#define TC_BDP (TC_BDW + 4)   /* their pitch (floats)                                     */
#define TC_VP (TC_BK + 8)     /* pitch (halves) of the transposed value tile              */

template <int DKP> struct tc_layout {
    static constexpr int QP = DKP + 8; /* row pitch (halves) of q+u, q+v, k and window rows: conflict-free fragment loads */
    static constexpr size_t qu = 0, qv = qu + (size_t)TC_BQ * QP * 2, ks = qv + (size_t)TC_BQ * QP * 2,
                            ws = ks + (size_t)TC_BK * QP * 2, vt = ws + (size_t)TC_NWIN * QP * 2,
                            bd = vt + (size_t)DKP * TC_VP * 2, bytes = bd + (size_t)TC_WARPS * 16 * TC_BDP * 4;
};

static __device__ __forceinline__ void mma16816(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

static __device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi); /* lo in the low 16 bits: the smaller column index */
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
}

/* A fragment (16 x 16, row-major source with pitch QP halves) of rows r0.., columns c0.. */
template <int QP>
static __device__ __forceinline__ void load_a(uint32_t *f, const __half *X, int r0, int c0, int g, int t) {
    const uint32_t *X32 = (const uint32_t *)X;
    f[0] = X32[((r0 + g) * QP + c0 + 2 * t) / 2];
    f[1] = X32[((r0 + g + 8) * QP + c0 + 2 * t) / 2];
    f[2] = X32[((r0 + g) * QP + c0 + 8 + 2 * t) / 2];
    f[3] = X32[((r0 + g + 8) * QP + c0 + 8 + 2 * t) / 2];
}

/* B fragment (16 x 8) from a matrix stored [n][k] (pitch QP halves): columns n0.., depth k0.. */
template <int QP>
static __device__ __forceinline__ void load_b(uint32_t *f, const __half *Y, int n0, int k0, int g, int t) {
    const uint32_t *Y32 = (const uint32_t *)Y;
    f[0] = Y32[((n0 + g) * QP + k0 + 2 * t) / 2];
    f[1] = Y32[((n0 + g) * QP + k0 + 8 + 2 * t) / 2];
}

/* Rows [row0, row0 + n) of a [rows, D] tensor's head columns as f16 into rows (base + r) % ring of dst
 * [ring][QP] (a ring of position rows), or transposed into dst [DKP][TC_VP] when trans; rows outside
 * [lo, hi) and columns >= dk as zeros. */
template <int DKP>
static __device__ void tc_stage(__half *dst, bool trans, const void *src, bool h16, int64_t row0, int n, int64_t lo,
                                int64_t hi, int64_t D, int64_t hoff, int dk, bool vec, int base = 0, int ring = 1 << 30) {
    constexpr int QP = tc_layout<DKP>::QP;
    if (vec) { /* dk % 4 == 0: a float4 is all in or all out */
        for (int idx = threadIdx.x; idx < n * (DKP / 4); idx += blockDim.x) {
            int r = idx / (DKP / 4), d = (idx - r * (DKP / 4)) * 4;
            int64_t row = row0 + r;
            float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
            if (row >= lo && row < hi && d < dk)
                x = ld4(src, row * D + hoff + d, h16);
            if (trans) {
                dst[(d + 0) * TC_VP + r] = __float2half_rn(x.x);
                dst[(d + 1) * TC_VP + r] = __float2half_rn(x.y);
                dst[(d + 2) * TC_VP + r] = __float2half_rn(x.z);
                dst[(d + 3) * TC_VP + r] = __float2half_rn(x.w);
            } else {
                uint2 w2 = make_uint2(pack_half2(x.x, x.y), pack_half2(x.z, x.w));
                *(uint2 *)(dst + (base + r) % ring * QP + d) = w2;
            }
        }
        return;
    }
    for (int idx = threadIdx.x; idx < n * DKP; idx += blockDim.x) {
        int r = idx / DKP, d = idx - r * DKP;
        int64_t row = row0 + r;
        float x = row >= lo && row < hi && d < dk ? ld(src, row * D + hoff + d, h16) : 0.0f;
        dst[trans ? d * TC_VP + r : (base + r) % ring * QP + d] = __float2half_rn(x);
    }
}

template <int DKP> static __global__ void __launch_bounds__(32 * TC_WARPS) att_tc_kernel(att_args a) {
    typedef tc_layout<DKP> Ly;
    constexpr int QP = Ly::QP, NDK = DKP / 16, NT = DKP / 8;
    extern __shared__ __align__(16) unsigned char tc_sm[];
    __half *Qu = (__half *)(tc_sm + Ly::qu), *Qv = (__half *)(tc_sm + Ly::qv), *Ks = (__half *)(tc_sm + Ly::ks);
    __half *Ws = (__half *)(tc_sm + Ly::ws), *Vt = (__half *)(tc_sm + Ly::vt);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    float *BD = (float *)(tc_sm + Ly::bd) + warp * 16 * TC_BDP;
    const int dk = a.dk;
    const int64_t nqb = (a.Tq + TC_BQ - 1) / TC_BQ, items = nqb * a.H;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int h = (int)(item % a.H);
        const int64_t i0 = item / a.H * TC_BQ, hoff = (int64_t)h * dk, iw = i0 + 16 * warp;
        __syncthreads(); /* the previous item is done with shared memory */
        /* q + u and q + v of the block's rows, rounded to f16 */
        for (int idx = threadIdx.x; idx < TC_BQ * DKP; idx += blockDim.x) {
            int r = idx / DKP, d = idx - r * DKP;
            int64_t i = i0 + r;
            float x = i < a.Tq && d < dk ? ld(a.q, i * a.D + hoff + d, a.q16) : 0.0f;
            bool in = i < a.Tq && d < dk;
            Qu[r * QP + d] = __float2half_rn(in ? x + a.u[hoff + d] : 0.0f);
            Qv[r * QP + d] = __float2half_rn(in ? x + a.bv[hoff + d] : 0.0f);
        }
        float o[NT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
        seg_pass sp;
        seg_first(a, i0, TC_BQ, &sp);
        do {
        int64_t jlo, jhi;
        key_range(a, sp, &jlo, &jhi);
        jlo -= (jlo - sp.slo) % TC_BK; /* tiles on the segment's grid of key positions (keys below k0 are absent) */
        int rbase = 0;
        for (int64_t j0 = jlo; j0 < jhi; j0 += TC_BK, rbase = (rbase + TC_BK) % TC_NWIN) {
            const int64_t nbase = a.center - (a.q0 + i0 + TC_BQ - 1) + j0; /* window row 0 */
            __syncthreads();
            /* key position j is row j - k0 of k and v */
            tc_stage<DKP>(Ks, false, a.k, a.k16, j0 - a.k0, TC_BK, 0, a.kend - a.k0, a.D, hoff, dk, a.vec);
            tc_stage<DKP>(Vt, true, a.v, a.v16, j0 - a.k0, TC_BK, 0, a.kend - a.k0, a.D, hoff, dk, a.vec);
            if (j0 == jlo)
                tc_stage<DKP>(Ws, false, a.p, a.p16, nbase, TC_NWIN, 0, a.P, a.D, hoff, dk, a.vec, rbase, TC_NWIN);
            else
                tc_stage<DKP>(Ws, false, a.p, a.p16, nbase + TC_NWIN - TC_BK, TC_BK, 0, a.P, a.D, hoff, dk, a.vec,
                              (rbase + TC_NWIN - TC_BK) % TC_NWIN, TC_NWIN);
            __syncthreads();
            /* this warp's window rows start at (i0 + BQ-1) - (iw + 15) */
            const int woff = TC_BQ - 16 - 16 * warp;
            float s[TC_BK / 8][4], bd[TC_BDW / 8][4];
#pragma unroll
            for (int nt = 0; nt < TC_BK / 8; nt++)
                s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int nt = 0; nt < TC_BDW / 8; nt++)
                bd[nt][0] = bd[nt][1] = bd[nt][2] = bd[nt][3] = 0.0f;
#pragma unroll
            for (int kc = 0; kc < NDK; kc++) {
                uint32_t fa[4], fb[2];
                load_a<QP>(fa, Qu, 16 * warp, 16 * kc, g, t);
#pragma unroll
                for (int nt = 0; nt < TC_BK / 8; nt++) {
                    load_b<QP>(fb, Ks, 8 * nt, 16 * kc, g, t);
                    mma16816(s[nt], fa, fb);
                }
                load_a<QP>(fa, Qv, 16 * warp, 16 * kc, g, t);
#pragma unroll
                for (int nt = 0; nt < TC_BDW / 8; nt++) {
                    int wrow = rbase + woff + 8 * nt + g; /* < 2 * TC_NWIN */
                    wrow -= wrow >= TC_NWIN ? TC_NWIN : 0;
                    const uint32_t *W32 = (const uint32_t *)Ws;
                    fb[0] = W32[(wrow * QP + 16 * kc + 2 * t) / 2];
                    fb[1] = W32[(wrow * QP + 16 * kc + 8 + 2 * t) / 2];
                    mma16816(bd[nt], fa, fb);
                }
            }
            /* the relative shift: score (r, c) takes window column c - r + 15 */
#pragma unroll
            for (int nt = 0; nt < TC_BDW / 8; nt++) {
                BD[g * TC_BDP + 8 * nt + 2 * t] = bd[nt][0];
                BD[g * TC_BDP + 8 * nt + 2 * t + 1] = bd[nt][1];
                BD[(g + 8) * TC_BDP + 8 * nt + 2 * t] = bd[nt][2];
                BD[(g + 8) * TC_BDP + 8 * nt + 2 * t + 1] = bd[nt][3];
            }
            __syncwarp();
            /* scores, masks and the online softmax; rr 0: row g (c0, c1), rr 1: row g + 8 (c2, c3) */
#pragma unroll
            for (int rr = 0; rr < 2; rr++) {
                const int r = g + 8 * rr;
                const int64_t pi = a.q0 + iw + r; /* the row's position */
                float mx = -INFINITY;
#pragma unroll
                for (int nt = 0; nt < TC_BK / 8; nt++)
#pragma unroll
                    for (int q = 0; q < 2; q++) {
                        const int c = 8 * nt + 2 * t + q;
                        const int64_t j = j0 + c;
                        const int64_t ir = iw + r; /* the row: masked outside this pass */
                        bool ok = ir >= sp.ilo && ir < sp.ihi && j >= a.k0 && j < jhi &&
                                  (a.window <= 0 || (pi - j <= a.window && j - pi <= a.window)) &&
                                  chunk_ok(a, pi, j, sp.slo);
                        float v = ok ? (s[nt][2 * rr + q] + BD[r * TC_BDP + c - r + 15]) * a.scale : -INFINITY;
                        s[nt][2 * rr + q] = v;
                        mx = fmaxf(mx, v);
                    }
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float mn = fmaxf(m[rr], mx);
                const float alpha = mn == -INFINITY ? 1.0f : expf(m[rr] - mn);
                float sum = 0.0f;
#pragma unroll
                for (int nt = 0; nt < TC_BK / 8; nt++)
#pragma unroll
                    for (int q = 0; q < 2; q++) {
                        float v = s[nt][2 * rr + q];
                        float w = v == -INFINITY ? 0.0f : expf(v - mn);
                        s[nt][2 * rr + q] = w;
                        sum += w;
                    }
                l[rr] = l[rr] * alpha + sum;
                m[rr] = mn;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    o[nt][2 * rr] *= alpha;
                    o[nt][2 * rr + 1] *= alpha;
                }
            }
            __syncwarp(); /* BD is rewritten by the next tile */
            /* O += P V: the weights' accumulator layout is the A-fragment layout of two key chunks */
#pragma unroll
            for (int kc = 0; kc < TC_BK / 16; kc++) {
                uint32_t fa[4] = {pack_half2(s[2 * kc][0], s[2 * kc][1]), pack_half2(s[2 * kc][2], s[2 * kc][3]),
                                  pack_half2(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                                  pack_half2(s[2 * kc + 1][2], s[2 * kc + 1][3])};
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    uint32_t fb[2];
                    load_b<TC_VP>(fb, Vt, 8 * nt, 16 * kc, g, t);
                    mma16816(o[nt], fa, fb);
                }
            }
        }
        } while (seg_next(a, &sp));
        /* y = O / l; rows at positions >= n_valid get zeros (a valid row sees itself: l > 0) */
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            float lt = l[rr];
            lt += __shfl_xor_sync(0xffffffffu, lt, 1);
            lt += __shfl_xor_sync(0xffffffffu, lt, 2);
            const int64_t i = iw + g + 8 * rr;
            if (i >= a.Tq)
                continue;
            const float inv = i < a.nvq ? 1.0f / lt : 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    int d = 8 * nt + 2 * t + q;
                    if (d < dk)
                        st(a.y, i * a.D + hoff + d, i < a.nvq ? o[nt][2 * rr + q] * inv : 0.0f, a.y16);
                }
        }
    }
}

/* ---- queries at given positions (the streaming session's form) ------------------------------- */

/* A warp per (query row, head), grid-stride: the row's position from the table, its segment found in
 * seg, then its keys one at a time in position order (online softmax), the head width over the lanes
 * (NPL elements each: dk <= 32 NPL); the f16 flag rounds the products' inputs as the reference does.
 * The rows of a streaming step are few (R+1 per stream) and their keys short (L + R+1), so the fused
 * tiles' 4-row and 16-row groups would mostly idle here. */
#define AQ_WARPS 4
template <int NPL> __global__ void __launch_bounds__(32 * AQ_WARPS) att_qpos_kernel(att_args a, const int64_t *qpos,
                                                                                     int64_t nvalid) {
    const int lane = threadIdx.x & 31;
    const int64_t items = a.Tq * (int64_t)a.H, stride = (int64_t)gridDim.x * AQ_WARPS;
    for (int64_t it = (int64_t)blockIdx.x * AQ_WARPS + threadIdx.x / 32; it < items; it += stride) {
        const int64_t r = it / a.H, hoff = (it % a.H) * (int64_t)a.dk, i = qpos[r], yo = r * a.D + hoff;
        int64_t slo = 0, shi = INT64_MAX;
        if (a.nseg) {
            const int64_t sg = cu_seg_find(a.seg, a.nseg, i);
            slo = a.seg[sg];
            shi = a.seg[sg + 1];
        }
        // the keys the row scores: [lo, hi)
        int64_t lo = a.k0 > slo ? a.k0 : slo, hi = a.kend < shi ? a.kend : shi;
        if (a.window > 0) {
            lo = i - a.window > lo ? i - a.window : lo;
            hi = i + a.window + 1 < hi ? i + a.window + 1 : hi;
        }
        if (a.chunk > 0) {
            lo = chunk_lo(a, i, slo) > lo ? chunk_lo(a, i, slo) : lo;
            hi = chunk_hi(a, i, slo) < hi ? chunk_hi(a, i, slo) : hi;
        }
        lo = i - a.center > lo ? i - a.center : lo; /* position rows center - (i - j) in [0, P) */
        hi = i - a.center + a.P < hi ? i - a.center + a.P : hi;
        if (i >= nvalid)
            hi = lo;
        float qu[NPL], qv[NPL], acc[NPL];
#pragma unroll
        for (int e = 0; e < NPL; e++) {
            const int d = lane + 32 * e;
            const float q = d < a.dk ? ld(a.q, r * a.D + hoff + d, a.q16) : 0.0f;
            qu[e] = d < a.dk ? round16(q + a.u[hoff + d], a.f16) : 0.0f;
            qv[e] = d < a.dk ? round16(q + a.bv[hoff + d], a.f16) : 0.0f;
            acc[e] = 0.0f;
        }
        float m = -INFINITY, l = 0.0f;
        for (int64_t j = lo; j < hi; j++) {
            const int64_t kr = (j - a.k0) * a.D + hoff, pr = (a.center - (i - j)) * a.D + hoff;
            float part = 0.0f;
#pragma unroll
            for (int e = 0; e < NPL; e++) {
                const int d = lane + 32 * e;
                if (d < a.dk)
                    part += qu[e] * round16(ld(a.k, kr + d, a.k16), a.f16) +
                            qv[e] * round16(ld(a.p, pr + d, a.p16), a.f16);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                part += __shfl_xor_sync(0xffffffffu, part, o);
            const float sc = part * a.scale, mn = fmaxf(m, sc), corr = expf(m - mn), w = expf(sc - mn);
            l = l * corr + w;
#pragma unroll
            for (int e = 0; e < NPL; e++) {
                const int d = lane + 32 * e;
                acc[e] = acc[e] * corr + (d < a.dk ? w * round16(ld(a.v, kr + d, a.v16), a.f16) : 0.0f);
            }
            m = mn;
        }
        const float inv = l > 0.0f ? 1.0f / l : 0.0f; /* no key: zeros (positions >= n_valid) */
#pragma unroll
        for (int e = 0; e < NPL; e++) {
            const int d = lane + 32 * e;
            if (d < a.dk)
                st(a.y, yo + d, acc[e] * inv, a.y16);
        }
    }
}

/* ---- host ------------------------------------------------------------------------------------- */

template <typename K> static vkasr_status launch(struct cu_backend *b, K kernel, size_t smem, uint64_t items,
                                                 const att_args &args) {
    struct err *e = &b->base.err;
    if (smem > b->d->prop.sharedMemPerBlockOptin)
        return err_set(e, VKASR_ERR_UNSUPPORTED, "op relpos_attention: dk = %d needs %zu bytes of shared memory, the device has %zu",
                       args.dk, smem, (size_t)b->d->prop.sharedMemPerBlockOptin);
    if (smem > 48u * 1024)
        CU_CHECK(e, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kernel<<<cu_grid(b, items, 1), 32 * 4, smem, b->stream>>>(args);
    CU_LAUNCHED(b);
    return VKASR_OK;
}

static bool aligned16(const be_tensor &t) { return t.addr % 16 == 0; }

vkasr_status cu_op_relpos_attention(struct cu_backend *b, const struct op_relpos_attention *a) {
    int64_t Tq = a->q.ne[0], Tk = a->k.ne[0], D = a->q.ne[1], H = a->heads, dk = D / H;
    if (dk > 256)
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED,
                       "op relpos_attention: head width dk = %lld is not supported (at most 256)", (long long)dk);
    if (Tq == 0)
        return VKASR_OK;
    att_args args;
    args.q = cu_ptr<void>(a->q);
    args.k = cu_ptr<void>(a->k);
    args.v = cu_ptr<void>(a->v);
    args.p = cu_ptr<void>(a->p);
    args.u = cu_ptr<float>(a->bias_u);
    args.bv = cu_ptr<float>(a->bias_v);
    args.y = cu_ptr<void>(a->y);
    args.q16 = a->q.type == BE_F16;
    args.k16 = a->k.type == BE_F16;
    args.v16 = a->v.type == BE_F16;
    args.p16 = a->p.type == BE_F16;
    args.y16 = a->y.type == BE_F16;
    /* positions and counts in 64 bits throughout (ops.c keeps them below 2^60) */
    args.Tq = Tq;
    args.Tk = Tk;
    args.q0 = a->q_pos0;
    args.k0 = a->k_pos0;
    args.nvq = a->n_valid > a->q_pos0 ? (a->n_valid - a->q_pos0 < Tq ? a->n_valid - a->q_pos0 : Tq) : 0;
    args.kend = a->k_pos0 + Tk < a->n_valid ? a->k_pos0 + Tk : a->n_valid;
    if (args.kend < args.k0)
        args.kend = args.k0;
    args.D = D;
    args.P = a->p.ne[0];
    args.window = a->window;
    args.chunk = a->chunk;
    args.lchunks = a->left_chunks;
    args.center = (args.P - 1) / 2;
    args.H = (int)H;
    args.dk = (int)dk;
    args.scale = (float)(1.0 / sqrt((double)dk));
    args.f16 = a->f16;
    args.seg = cu_ptr<int64_t>(a->seg);
    args.nseg = a->seg.addr ? a->seg.ne[0] - 1 : 0;
    args.vec = D % 4 == 0 && dk % 4 == 0 && aligned16(a->q) && aligned16(a->k) && aligned16(a->v) && aligned16(a->p);
    if (a->q_pos.addr) {
        b->op_label = "relpos_attention_qpos";
        const int64_t *qp = cu_ptr<int64_t>(a->q_pos);
        const unsigned grid = cu_grid(b, (uint64_t)Tq * (uint64_t)H, AQ_WARPS);
        if (dk <= 32)
            att_qpos_kernel<1><<<grid, 32 * AQ_WARPS, 0, b->stream>>>(args, qp, a->n_valid);
        else if (dk <= 64)
            att_qpos_kernel<2><<<grid, 32 * AQ_WARPS, 0, b->stream>>>(args, qp, a->n_valid);
        else if (dk <= 128)
            att_qpos_kernel<4><<<grid, 32 * AQ_WARPS, 0, b->stream>>>(args, qp, a->n_valid);
        else
            att_qpos_kernel<8><<<grid, 32 * AQ_WARPS, 0, b->stream>>>(args, qp, a->n_valid);
        CU_LAUNCHED(b);
        return VKASR_OK;
    }
    bool taken = false; /* long sequences in f16 mode: unfused, through cuBLASLt (its rule is there) */
    TRY(cu_att_gemm(b, a, &taken));
    if (taken)
        return VKASR_OK;
    if (a->f16 && b->d->tensor_cores && dk <= 128) {
        b->op_label = "relpos_attention_tc";
        uint64_t items = (uint64_t)((Tq + TC_BQ - 1) / TC_BQ) * (uint64_t)H;
        if (dk <= 32)
            return launch(b, att_tc_kernel<32>, tc_layout<32>::bytes, items, args);
        if (dk <= 64)
            return launch(b, att_tc_kernel<64>, tc_layout<64>::bytes, items, args);
        return launch(b, att_tc_kernel<128>, tc_layout<128>::bytes, items, args);
    }
    b->op_label = "relpos_attention";
    uint64_t items = (uint64_t)((Tq + AF_BQ - 1) / AF_BQ) * (uint64_t)H;
    size_t smem = af_smem((int)dk);
    if (dk <= 32)
        return launch(b, att_f32_kernel<1>, smem, items, args);
    if (dk <= 64)
        return launch(b, att_f32_kernel<2>, smem, items, args);
    if (dk <= 128)
        return launch(b, att_f32_kernel<4>, smem, items, args);
    return launch(b, att_f32_kernel<8>, smem, items, args);
}
