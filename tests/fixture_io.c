/* fixture_io.c — the parity fixtures' file readers (fixture_io.h). */
#include "fixture_io.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *fixture_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = sz >= 0 ? malloc((size_t)sz + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[sz] = '\0';
        if (n)
            *n = (size_t)sz;
    }
    return buf;
}

float *fixture_read_npy(const char *path, size_t *rows, size_t *cols) {
    size_t n;
    char *buf = fixture_read_file(path, &n);
    if (!buf || n < 12 || memcmp(buf, "\x93NUMPY", 6) != 0) {
        free(buf);
        return NULL;
    }
    size_t hlen, off;
    if (buf[6] == 1) {
        hlen = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8;
        off = 10;
    } else {
        hlen = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8 | (size_t)(unsigned char)buf[10] << 16 |
               (size_t)(unsigned char)buf[11] << 24;
        off = 12;
    }
    char *hdr = buf + off;
    float *out = NULL;
    if (off + hlen <= n && strstr(hdr, "'<f4'") && strstr(hdr, "'fortran_order': False")) {
        char *sh = strstr(hdr, "'shape': (");
        long long r = 0, c = 1;
        if (sh && sscanf(sh, "'shape': (%lld, %lld)", &r, &c) >= 1 && r >= 0 && c >= 0 &&
            off + hlen + (size_t)(r * c) * 4 <= n) {
            out = malloc((size_t)(r * c) * 4 + 4);
            if (out) {
                memcpy(out, buf + off + hlen, (size_t)(r * c) * 4);
                *rows = (size_t)r;
                *cols = (size_t)c;
            }
        }
    }
    free(buf);
    return out;
}

int fixture_read_ids(const char *path, int32_t **ids, size_t *n) {
    char *b = fixture_read_file(path, NULL);
    cJSON *j = b ? cJSON_Parse(b) : NULL;
    free(b);
    cJSON *a = j ? cJSON_GetObjectItem(j, "ids") : NULL;
    if (!cJSON_IsArray(a)) {
        cJSON_Delete(j);
        return -1;
    }
    *n = (size_t)cJSON_GetArraySize(a);
    *ids = malloc((*n + 1) * sizeof **ids);
    for (size_t i = 0; *ids && i < *n; i++)
        (*ids)[i] = cJSON_GetArrayItem(a, (int)i)->valueint;
    cJSON_Delete(j);
    return *ids ? 0 : -1;
}
