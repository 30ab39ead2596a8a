/* nemo_names.c — NeMo state-dict keys -> vkasr's canonical tensor names (those of the transformers
 * Parakeet models, which the HF loader and model_prepare take): the inverse of the module renaming
 * transformers' NeMo converter does (spec §8.2). Keys of modules vkasr does not know are reported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nemo_internal.h"

static int starts(const char *s, const char *p) {
    return strncmp(s, p, strlen(p)) == 0;
}

static int is_param(const char *s) {
    return !strcmp(s, "weight") || !strcmp(s, "bias");
}

static char *cat(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *r = malloc(la + lb + 1);
    if (r) {
        memcpy(r, a, la);
        memcpy(r + la, b, lb + 1);
    }
    return r;
}

/* A conformer layer's parameter (the part after "encoder.layers.N."), renamed into out. */
static int layer_rest(const char *r, char *out, size_t cap) {
    static const char *const same[] = {"feed_forward1.linear1.", "feed_forward1.linear2.", "feed_forward2.linear1.",
                                       "feed_forward2.linear2.", "norm_feed_forward1.",    "norm_feed_forward2.",
                                       "norm_self_att.",         "norm_conv.",             "norm_out.",
                                       "conv.pointwise_conv1.",  "conv.depthwise_conv.",   "conv.pointwise_conv2."};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (starts(r, same[i]) && is_param(r + strlen(same[i])))
            return snprintf(out, cap, "%s", r) < (int)cap;
    static const struct {
        const char *from, *to;
    } attn[] = {{"self_attn.linear_q.", "self_attn.q_proj."},     {"self_attn.linear_k.", "self_attn.k_proj."},
                {"self_attn.linear_v.", "self_attn.v_proj."},     {"self_attn.linear_out.", "self_attn.o_proj."},
                {"self_attn.linear_pos.", "self_attn.relative_k_proj."}};
    for (size_t i = 0; i < sizeof attn / sizeof attn[0]; i++)
        if (starts(r, attn[i].from) && is_param(r + strlen(attn[i].from)))
            return snprintf(out, cap, "%s%s", attn[i].to, r + strlen(attn[i].from)) < (int)cap;
    if (!strcmp(r, "self_attn.pos_bias_u") || !strcmp(r, "self_attn.pos_bias_v"))
        return snprintf(out, cap, "self_attn.bias_%c", r[strlen(r) - 1]) < (int)cap;
    if (starts(r, "conv.batch_norm.")) {
        const char *p = r + strlen("conv.batch_norm.");
        if (is_param(p) || !strcmp(p, "running_mean") || !strcmp(p, "running_var") ||
            !strcmp(p, "num_batches_tracked"))
            return snprintf(out, cap, "conv.norm.%s", p) < (int)cap;
    }
    return 0;
}

char *nemo_map_name(const char *k, bool *unknown) {
    *unknown = false;
    static const struct {
        const char *from, *to;
    } pre[] = {
        {"encoder.pre_encode.out.", "encoder.subsampling.linear."},
        {"decoder.decoder_layers.0.", "ctc_head."},
        {"ctc_decoder.decoder_layers.0.", "ctc_head."},
        {"decoder.prediction.embed.", "decoder.embedding."},
        {"joint.enc.", "encoder_projector."},
        {"joint.pred.", "decoder.decoder_projector."},
        /* joint_net = [activation, Dropout, Linear]; without joint dropout the Linear is index 1 */
        {"joint.joint_net.2.", "joint.head."},
        {"joint.joint_net.1.", "joint.head."},
        /* Nemotron 3.5's prompt_kernel = [Linear, ReLU, Linear] (transformers' prompt_projector) */
        {"prompt_kernel.0.", "prompt_projector.linear_1."},
        {"prompt_kernel.2.", "prompt_projector.linear_2."},
    };
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
        if (starts(k, pre[i].from) && is_param(k + strlen(pre[i].from)))
            return cat(pre[i].to, k + strlen(pre[i].from));
    if (!strcmp(k, "preprocessor.featurizer.window") || !strcmp(k, "preprocessor.featurizer.fb"))
        return cat(k, "");
    if (starts(k, "encoder.pre_encode.conv.")) {
        const char *r = k + strlen("encoder.pre_encode.conv.");
        if (strchr("02356", r[0]) && r[0] && r[1] == '.' && is_param(r + 2))
            return cat("encoder.subsampling.layers.", r);
    }
    if (starts(k, "decoder.prediction.dec_rnn.lstm.")) {
        const char *r = k + strlen("decoder.prediction.dec_rnn.lstm.");
        if (starts(r, "weight_ih_l") || starts(r, "weight_hh_l") || starts(r, "bias_ih_l") || starts(r, "bias_hh_l")) {
            const char *d = strrchr(r, 'l') + 1;
            if (*d && strspn(d, "0123456789") == strlen(d) && strlen(d) <= 3)
                return cat("decoder.lstm.", r);
        }
    }
    if (starts(k, "encoder.layers.")) {
        const char *r = k + strlen("encoder.layers.");
        size_t nd = strspn(r, "0123456789");
        if (nd >= 1 && nd <= 4 && r[nd] == '.') {
            char rest[128], out[160];
            if (layer_rest(r + nd + 1, rest, sizeof rest)) {
                snprintf(out, sizeof out, "encoder.layers.%.*s.%s", (int)nd, r, rest);
                return cat(out, "");
            }
        }
    }
    *unknown = true;
    return NULL;
}
