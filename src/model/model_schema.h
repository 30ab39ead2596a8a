/* model_schema.h — the expected tensor set of a configuration and model_validate (model_schema.c).
 * Internal to src/model. */
#ifndef VKASR_MODEL_SCHEMA_H
#define VKASR_MODEL_SCHEMA_H

#include "model_types.h"

/* The tensor set a configuration requires, in a fixed order. canonical: the kernel layout written by
 * model_prepare (and stored in GGUF); otherwise the HF transformers layout. */
struct tensor_spec {
    char name[96];
    int nd;
    int64_t ne[4];
    const char *why; /* config fields the shape comes from, for messages */
};
vkasr_status model_expected_tensors(const struct model_config *cfg, int canonical, struct tensor_spec **out, int *count,
                                    struct err *e);
/* Checks the tensor set of an opened model against its configuration (names, shapes, dtypes, and the
 * presence of tensors the configuration says are absent). */
vkasr_status model_validate(const struct model_file *mf, struct err *e);

#endif
