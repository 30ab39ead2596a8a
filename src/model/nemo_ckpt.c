/* nemo_ckpt.c — a PyTorch zip checkpoint (torch.save's format since 1.6) read in place: the zip's
 * central directory (ZIP64 included) gives each record's offset, records are stored uncompressed, so
 * tensors point into the image. libarchive's zip reader is not used because it hands out copies, not
 * offsets. data.pkl goes through the restricted unpickler (pickle.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nemo_internal.h"
#include "model_file.h"
#include "model_internal.h"
#include "pickle.h"

struct zent {
    const char *name;
    size_t name_len;
    const uint8_t *data;
    uint64_t size;
};

static uint64_t rd(const uint8_t *p, int k) {
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The ZIP64 extra field (id 1) of a central entry: the 64-bit values of the fields set to all-ones. */
static int zip64_extra(const uint8_t *x, size_t xl, uint64_t *usize, uint64_t *csize, uint64_t *off) {
    while (xl >= 4) {
        uint64_t id = rd(x, 2), len = rd(x + 2, 2);
        if (len > xl - 4)
            return 0;
        if (id == 1) {
            const uint8_t *q = x + 4;
            uint64_t left = len;
            uint64_t *f[3] = {usize, csize, off};
            for (int i = 0; i < 3; i++) {
                if (*f[i] != 0xFFFFFFFFu)
                    continue;
                if (left < 8)
                    return 0;
                *f[i] = rd(q, 8);
                q += 8;
                left -= 8;
            }
            return 1;
        }
        x += 4 + len;
        xl -= 4 + (size_t)len;
    }
    return 1;
}

static vkasr_status zip_index(const char *src, const uint8_t *d, uint64_t n, struct zent **out, int *count,
                              struct err *e) {
    *out = NULL;
    *count = 0;
    if (n < 22)
        return err_set(e, VKASR_ERR_MODEL, "%s: too short for a zip archive", src);
    /* end of central directory: the last signature within 64 KiB + 22 bytes of the end */
    uint64_t lo = n > 22 + 65535 ? n - 22 - 65535 : 0, eocd = UINT64_MAX;
    for (uint64_t i = n - 22 + 1; i-- > lo;)
        if (rd(d + i, 4) == 0x06054b50u) {
            eocd = i;
            break;
        }
    if (eocd == UINT64_MAX)
        return err_set(e, VKASR_ERR_MODEL, "%s: no zip end-of-central-directory record (truncated?)", src);
    uint64_t nent = rd(d + eocd + 10, 2), cdsize = rd(d + eocd + 12, 4), cdoff = rd(d + eocd + 16, 4);
    if (nent == 0xFFFF || cdsize == 0xFFFFFFFFu || cdoff == 0xFFFFFFFFu) {
        /* ZIP64: locator just before the record, pointing at the ZIP64 end record */
        if (eocd < 20 || rd(d + eocd - 20, 4) != 0x07064b50u)
            return err_set(e, VKASR_ERR_MODEL, "%s: zip64 sizes without a zip64 locator", src);
        uint64_t r = rd(d + eocd - 20 + 8, 8);
        if (r > n || n - r < 56 || rd(d + r, 4) != 0x06064b50u)
            return err_set(e, VKASR_ERR_MODEL, "%s: zip64 end-of-central-directory record out of place", src);
        nent = rd(d + r + 32, 8);
        cdsize = rd(d + r + 40, 8);
        cdoff = rd(d + r + 48, 8);
    }
    if (cdoff > n || cdsize > n - cdoff || nent > cdsize / 46)
        return err_set(e, VKASR_ERR_MODEL, "%s: zip central directory (%llu entries at %llu) exceeds the file", src,
                       (unsigned long long)nent, (unsigned long long)cdoff);
    struct zent *z = calloc(nent ? (size_t)nent : 1, sizeof *z);
    if (!z)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    const uint8_t *c = d + cdoff, *cend = d + cdoff + cdsize;
    for (uint64_t i = 0; i < nent; i++) {
        if (cend - c < 46 || rd(c, 4) != 0x02014b50u) {
            free(z);
            return err_set(e, VKASR_ERR_MODEL, "%s: zip central directory entry %llu is malformed", src,
                           (unsigned long long)i);
        }
        uint64_t flags = rd(c + 8, 2), method = rd(c + 10, 2), csize = rd(c + 20, 4), usize = rd(c + 24, 4);
        uint64_t nl = rd(c + 28, 2), xl = rd(c + 30, 2), cl = rd(c + 32, 2), off = rd(c + 42, 4);
        if ((uint64_t)(cend - c) - 46 < nl + xl + cl || !zip64_extra(c + 46 + nl, (size_t)xl, &usize, &csize, &off)) {
            free(z);
            return err_set(e, VKASR_ERR_MODEL, "%s: zip central directory entry %llu runs past the directory", src,
                           (unsigned long long)i);
        }
        const char *name = (const char *)c + 46;
        if (method != 0 || csize != usize || (flags & 1)) {
            free(z);
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: zip record '%.*s' is compressed or encrypted (method %llu): PyTorch stores records "
                           "uncompressed",
                           src, (int)nl, name, (unsigned long long)method);
        }
        if (off > n || n - off < 30 || rd(d + off, 4) != 0x04034b50u ||
            n - off - 30 < rd(d + off + 26, 2) + rd(d + off + 28, 2) ||
            n - off - 30 - rd(d + off + 26, 2) - rd(d + off + 28, 2) < usize) {
            free(z);
            return err_set(e, VKASR_ERR_MODEL, "%s: zip record '%.*s' (%llu bytes at %llu) exceeds the file", src,
                           (int)nl, name, (unsigned long long)usize, (unsigned long long)off);
        }
        z[i].name = name;
        z[i].name_len = (size_t)nl;
        z[i].data = d + off + 30 + rd(d + off + 26, 2) + rd(d + off + 28, 2);
        z[i].size = usize;
        c += 46 + nl + xl + cl;
    }
    *out = z;
    *count = (int)nent;
    return VKASR_OK;
}

static const struct zent *zfind(const struct zent *z, int n, const char *prefix, size_t pl, const char *rest) {
    size_t rl = strlen(rest);
    for (int i = 0; i < n; i++)
        if (z[i].name_len == pl + rl && memcmp(z[i].name, prefix, pl) == 0 && memcmp(z[i].name + pl, rest, rl) == 0)
            return &z[i];
    return NULL;
}

void nemo_tensors_free(struct nemo_tensor *t, int count) {
    if (!t)
        return;
    for (int i = 0; i < count; i++) {
        free(t[i].name);
        free(t[i].owned);
    }
    free(t);
}

/* One pickled tensor over its storage record: bounds, then in place or a contiguous copy. */
static vkasr_status make_tensor(const char *src, const struct pk_tensor *p, const struct zent *rec,
                                struct nemo_tensor *t, struct err *e) {
    const size_t esz = mt_dtype_size(p->type);
    if (p->nd > 4)
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s' has %d dimensions (at most 4 are supported)", src, p->name,
                       p->nd);
    if ((uint64_t)p->storage_numel > rec->size / esz || rec->size != (uint64_t)p->storage_numel * esz)
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': storage record data/%s holds %llu bytes, not %lld elements of %zu",
                       src, p->name, p->storage, (unsigned long long)rec->size, (long long)p->storage_numel, esz);
    /* the last element reached, overflow-safe: every index below numel of the storage */
    uint64_t numel = 1, last = (uint64_t)p->offset;
    bool contiguous = true;
    uint64_t expect = 1;
    for (int i = p->nd - 1; i >= 0; i--) {
        uint64_t s = (uint64_t)p->size[i], st = (uint64_t)p->stride[i];
        if (s == 0) {
            numel = 0;
            break;
        }
        if (s > (uint64_t)p->storage_numel + 1 || st > (uint64_t)p->storage_numel)
            return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': size or stride exceeds its storage", src, p->name);
        numel *= s;
        last += (s - 1) * st;
        if (numel > (uint64_t)p->storage_numel + 1 || last > (uint64_t)INT64_MAX)
            return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': size exceeds its storage", src, p->name);
        if (s > 1 && st != expect)
            contiguous = false;
        expect *= s;
    }
    if (numel > 0 && last >= (uint64_t)p->storage_numel)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: tensor '%s': offset %lld, size and stride reach element %llu of a %lld-element storage", src,
                       p->name, (long long)p->offset, (unsigned long long)last, (long long)p->storage_numel);
    t->type = p->type;
    t->nd = p->nd;
    for (int i = 0; i < p->nd; i++)
        t->ne[i] = p->size[i];
    t->nbytes = numel * esz;
    if (contiguous || numel == 0) {
        t->data = rec->data + (numel ? (uint64_t)p->offset * esz : 0);
        return VKASR_OK;
    }
    t->owned = malloc(t->nbytes);
    if (!t->owned)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory copying tensor '%s'", p->name);
    uint8_t *dst = t->owned;
    int64_t idx[PK_MAX_DIMS] = {0};
    for (uint64_t k = 0; k < numel; k++) {
        uint64_t off = (uint64_t)p->offset;
        for (int i = 0; i < p->nd; i++)
            off += (uint64_t)idx[i] * (uint64_t)p->stride[i];
        memcpy(dst + k * esz, rec->data + off * esz, esz);
        for (int i = p->nd - 1; i >= 0; i--) {
            if (++idx[i] < p->size[i])
                break;
            idx[i] = 0;
        }
    }
    t->data = t->owned;
    return VKASR_OK;
}

vkasr_status nemo_ckpt_read(const char *src, const uint8_t *image, uint64_t size, struct nemo_tensor **out,
                            int *count, struct err *e) {
    *out = NULL;
    *count = 0;
    if (size >= 2 && image[0] == 0x80 && image[1] <= 5)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: a legacy (pre-zip) PyTorch checkpoint: not supported; load it in PyTorch >= 1.6 and "
                       "save it again (torch.save writes the zip format)",
                       src);
    if (size < 4 || rd(image, 4) != 0x04034b50u)
        return err_set(e, VKASR_ERR_MODEL, "%s: not a PyTorch zip checkpoint (no zip signature)", src);
    struct zent *z = NULL;
    int nz = 0;
    TRY(zip_index(src, image, size, &z, &nz, e));
    /* every record lives under one folder: find <prefix>data.pkl */
    const struct zent *pkl = NULL;
    for (int i = 0; i < nz && !pkl; i++)
        if (z[i].name_len >= 8 && memcmp(z[i].name + z[i].name_len - 8, "data.pkl", 8) == 0 &&
            (z[i].name_len == 8 || z[i].name[z[i].name_len - 9] == '/'))
            pkl = &z[i];
    if (!pkl) {
        free(z);
        return err_set(e, VKASR_ERR_MODEL, "%s: no data.pkl record in the checkpoint", src);
    }
    const size_t pl = pkl->name_len - 8;
    const struct zent *bo = zfind(z, nz, pkl->name, pl, "byteorder");
    if (bo && !(bo->size == 6 && memcmp(bo->data, "little", 6) == 0)) {
        free(z);
        return err_set(e, VKASR_ERR_MODEL, "%s: byteorder record is not \"little\" (big-endian checkpoints are not supported)",
                       src);
    }
    struct pk_tensor *pt = NULL;
    int np = 0;
    vkasr_status st = pickle_state_dict(src, pkl->data, (size_t)pkl->size, &pt, &np, e);
    struct nemo_tensor *t = NULL;
    if (st == VKASR_OK) {
        t = calloc(np ? (size_t)np : 1, sizeof *t);
        if (!t)
            st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    }
    int k = 0;
    char rec[300];
    for (; st == VKASR_OK && k < np; k++) {
        snprintf(rec, sizeof rec, "data/%s", pt[k].storage);
        const struct zent *r = strlen(pt[k].storage) < 200 ? zfind(z, nz, pkl->name, pl, rec) : NULL;
        if (!r) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': storage record data/%.200s is missing", src, pt[k].name,
                         pt[k].storage);
            break;
        }
        st = make_tensor(src, &pt[k], r, &t[k], e);
        if (st == VKASR_OK) {
            t[k].name = strdup(pt[k].name);
            if (!t[k].name)
                st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        }
    }
    pickle_free(pt, np);
    free(z);
    if (st != VKASR_OK) {
        nemo_tensors_free(t, k + 1 <= np ? k + 1 : np);
        return st;
    }
    *out = t;
    *count = np;
    return VKASR_OK;
}
