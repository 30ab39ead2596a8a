/* nemo_archive.c — the .nemo container through libarchive: a tar, or a gzip-compressed tar (older
 * NeMo). The archive is read from the mapped image; libarchive hands out an uncompressed tar's data
 * as pointers into that image, so members (model_weights.ckpt above all) are used in place and only
 * a compressed archive's members are copied, once.
 */
#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>

#include "nemo_internal.h"

/* Most members a .nemo may have (NeMo writes a handful). */
#define NEMO_MAX_MEMBERS 4096

void nemo_archive_free(struct nemo_archive *a) {
    if (!a)
        return;
    for (int i = 0; i < a->n; i++) {
        free(a->m[i].name);
        free(a->m[i].owned);
    }
    free(a->m);
    a->m = NULL;
    a->n = 0;
}

const struct nemo_member *nemo_archive_find(const struct nemo_archive *a, const char *name) {
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->m[i].name, name) == 0)
            return &a->m[i];
    return NULL;
}

/* Appends to a copy, growing it as data arrives (never by the header's claim alone: a hostile size
 * must not allocate what the archive does not hold). */
static int append(struct nemo_member *m, size_t *cap, const void *p, size_t n) {
    if (m->size + n > *cap) {
        size_t nc = *cap ? *cap : 1 << 16;
        while (nc < m->size + n)
            nc *= 2;
        void *q = realloc(m->owned, nc);
        if (!q)
            return 0;
        m->owned = q;
        *cap = nc;
    }
    memcpy((uint8_t *)m->owned + m->size, p, n);
    m->size += n;
    return 1;
}

/* The data of the current entry: in place while its blocks are consecutive in the image, else copied. */
static vkasr_status read_data(const char *src, struct archive *ar, const uint8_t *img, size_t img_size,
                              struct nemo_member *m, int64_t declared, struct err *e) {
    size_t cap = 0;
    const uint8_t *in_place = NULL;
    for (;;) {
        const void *buf;
        size_t len;
        la_int64_t off;
        int r = archive_read_data_block(ar, &buf, &len, &off);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK)
            return err_set(e, VKASR_ERR_MODEL, "%s: member '%s': %s", src, m->name, archive_error_string(ar));
        if (off < 0 || (uint64_t)off != m->size || (uint64_t)m->size + len > (uint64_t)declared)
            return err_set(e, VKASR_ERR_MODEL, "%s: member '%s' is sparse or longer than its header says", src,
                           m->name);
        const uint8_t *p = buf;
        bool inside = p >= img && len <= img_size && (size_t)(p - img) <= img_size - len;
        if (!m->owned && inside && (m->size == 0 || p == in_place + m->size)) {
            if (m->size == 0)
                in_place = p;
            m->size += len;
            continue;
        }
        if (!m->owned && m->size > 0) { /* leaving the image: copy what was in place so far */
            uint64_t had = m->size;
            m->size = 0;
            if (!append(m, &cap, in_place, (size_t)had))
                return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory reading member '%s'", m->name);
        }
        if (len && !append(m, &cap, p, len))
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory reading member '%s'", m->name);
    }
    if (m->size != (uint64_t)declared)
        return err_set(e, VKASR_ERR_MODEL, "%s: member '%s' holds %llu of its %lld bytes (truncated archive)", src,
                       m->name, (unsigned long long)m->size, (long long)declared);
    m->data = m->owned ? m->owned : in_place;
    if (!m->data)
        m->data = (const uint8_t *)"";
    return VKASR_OK;
}

static vkasr_status read_all(const char *src, struct archive *ar, const uint8_t *img, size_t size,
                             struct nemo_archive *a, struct err *e) {
    if (archive_read_open_memory(ar, img, size) != ARCHIVE_OK)
        return err_set(e, VKASR_ERR_MODEL, "%s: not a tar or gzip-compressed tar archive: %s", src,
                       archive_error_string(ar));
    for (;;) {
        struct archive_entry *ent;
        int r = archive_read_next_header(ar, &ent);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
            return err_set(e, VKASR_ERR_MODEL, "%s: not a readable tar archive: %s", src, archive_error_string(ar));
        if (archive_entry_filetype(ent) != AE_IFREG)
            continue;
        const char *name = archive_entry_pathname(ent);
        if (!name)
            return err_set(e, VKASR_ERR_MODEL, "%s: a member without a name", src);
        while (name[0] == '.' && name[1] == '/')
            name += 2;
        if (nemo_archive_find(a, name))
            return err_set(e, VKASR_ERR_MODEL, "%s: member '%s' appears twice", src, name);
        if (a->n >= NEMO_MAX_MEMBERS)
            return err_set(e, VKASR_ERR_MODEL, "%s: more than %d members", src, NEMO_MAX_MEMBERS);
        if (!archive_entry_size_is_set(ent) || archive_entry_size(ent) < 0)
            return err_set(e, VKASR_ERR_MODEL, "%s: member '%s' has no size", src, name);
        struct nemo_member *m = realloc(a->m, (size_t)(a->n + 1) * sizeof *m);
        if (!m)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        a->m = m;
        m = &a->m[a->n];
        memset(m, 0, sizeof *m);
        m->name = strdup(name);
        if (!m->name)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        a->n++;
        TRY(read_data(src, ar, img, size, m, archive_entry_size(ent), e));
    }
    return VKASR_OK;
}

vkasr_status nemo_archive_read(const char *src, const void *image, size_t size, struct nemo_archive *a,
                               struct err *e) {
    memset(a, 0, sizeof *a);
    struct archive *ar = archive_read_new();
    if (!ar)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    vkasr_status st = VKASR_OK;
    if (archive_read_support_filter_gzip(ar) != ARCHIVE_OK || archive_read_support_format_tar(ar) != ARCHIVE_OK)
        st = err_set(e, VKASR_ERR_INTERNAL, "%s: libarchive lacks tar or gzip support: %s", src,
                     archive_error_string(ar));
    else
        st = read_all(src, ar, image, size, a, e);
    archive_read_free(ar);
    if (st != VKASR_OK)
        nemo_archive_free(a);
    return st;
}
