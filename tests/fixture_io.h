/* fixture_io.h — readers of the parity fixtures' files (tools/fixtures: <clip>/mel.npy, encoder.npy,
 * tokens.json) shared by the tests that compare against them. Each returns NULL / -1 for a file that
 * is missing or not of the expected form; the caller frees what is returned. */
#ifndef VKASR_TESTS_FIXTURE_IO_H
#define VKASR_TESTS_FIXTURE_IO_H

#include <stddef.h>
#include <stdint.h>

/* The whole file, NUL-terminated; *n (may be NULL) its length. */
char *fixture_read_file(const char *path, size_t *n);
/* A .npy of float32, little-endian, C order, 1-D ([rows] as [rows, 1]) or 2-D (format 1 or 2). */
float *fixture_read_npy(const char *path, size_t *rows, size_t *cols);
/* tokens.json's "ids": 0 with *n of them in *ids, -1 otherwise. */
int fixture_read_ids(const char *path, int32_t **ids, size_t *n);

#endif
