/*
 * vkasr.h — the public C API of vkasr, speech recognition with NVIDIA Parakeet models
 * (FastConformer encoder; TDT, RNN-T and CTC heads) on any Vulkan 1.2 GPU.
 *
 * Objects
 *   vkasr_model    weights on one device plus the tokenizer. Read-only after vkasr_model_load():
 *                  one model may be shared by any number of threads.
 *   vkasr_session  the working state of one transcription at a time (scratch memory, command
 *                  buffers). Not thread-safe: use one session per thread.
 *   vkasr_result   owned by its session; valid until the next transcribe call on that session or
 *                  vkasr_session_free().
 *
 * Errors
 *   Every fallible call returns a vkasr_status. Calls that create objects also fill an optional
 *   vkasr_error with a message naming what failed (file, tensor, field, device feature); session
 *   calls keep the last message in the session (vkasr_session_last_error()). The library never
 *   exits or aborts the process on bad input, and has no global mutable state.
 *
 * Usage
 *
 *     #include <vkasr.h>
 *     #include <stdio.h>
 *
 *     int main(void) {
 *         vkasr_error err;
 *         vkasr_model *model = NULL;
 *         vkasr_model_params mp = vkasr_model_params_default();
 *         if (vkasr_model_load("models/vkasr-tdt-tiny-en.gguf", &mp, &model, &err) != VKASR_OK) {
 *             fprintf(stderr, "%s\n", err.message);
 *             return 1;
 *         }
 *         vkasr_session *session = NULL;
 *         if (vkasr_session_create(model, &session, &err) != VKASR_OK) {
 *             fprintf(stderr, "%s\n", err.message);
 *             vkasr_model_free(model);
 *             return 1;
 *         }
 *         const vkasr_result *result = NULL;
 *         vkasr_status st = vkasr_transcribe_file(session, "speech.wav", NULL, &result);
 *         if (st == VKASR_OK) {
 *             printf("%s\n", vkasr_result_text(result));
 *             size_t n = 0;
 *             const vkasr_word *words = vkasr_result_words(result, &n);
 *             for (size_t i = 0; i < n; i++)
 *                 printf("%8.2f %8.2f %s\n", words[i].start, words[i].end, words[i].text);
 *         } else {
 *             fprintf(stderr, "%s\n", vkasr_session_last_error(session));
 *         }
 *         vkasr_session_free(session);
 *         vkasr_model_free(model);
 *         return st == VKASR_OK ? 0 : 1;
 *     }
 *
 * Parameters structs start with a struct_size field; always obtain them from the matching
 * *_default() function and then change fields. Passing NULL means "defaults".
 * All strings are UTF-8. Times are in seconds (double).
 */
#ifndef VKASR_H
#define VKASR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VKASR_VERSION_MAJOR 0
#define VKASR_VERSION_MINOR 1
#define VKASR_VERSION_PATCH 0
#define VKASR_VERSION_NUMBER (VKASR_VERSION_MAJOR * 10000 + VKASR_VERSION_MINOR * 100 + VKASR_VERSION_PATCH)

/* The sample rate the models consume; other rates are resampled. */
#define VKASR_SAMPLE_RATE 16000

#if defined(_WIN32) && defined(VKASR_SHARED_BUILD)
#define VKASR_API __declspec(dllexport)
#elif defined(__GNUC__)
#define VKASR_API __attribute__((visibility("default")))
#else
#define VKASR_API
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Status codes. Errors are negative; VKASR_ABORTED (the abort callback asked to stop) is positive.  */

typedef enum vkasr_status {
    VKASR_OK = 0,
    VKASR_ABORTED = 1,            /* stopped by the abort callback; partial results are kept   */
    VKASR_ERR_INVALID_ARG = -1,   /* a NULL handle, an out-of-range parameter                  */
    VKASR_ERR_NO_MEMORY = -2,     /* host memory                                               */
    VKASR_ERR_IO = -3,            /* a file could not be opened, read or written               */
    VKASR_ERR_MODEL = -4,         /* a model file or directory is malformed or unsupported     */
    VKASR_ERR_AUDIO = -5,         /* audio could not be decoded or is unusable                 */
    VKASR_ERR_NO_DEVICE = -6,     /* no Vulkan device, or none with the required features      */
    VKASR_ERR_VULKAN = -7,        /* a Vulkan call failed                                      */
    VKASR_ERR_DEVICE_MEMORY = -8, /* device memory exhausted                                   */
    VKASR_ERR_DEVICE_LOST = -9,   /* the device was lost; free the session and the model      */
    VKASR_ERR_UNSUPPORTED = -10,  /* a valid request this build or device cannot serve         */
    VKASR_ERR_INTERNAL = -11      /* a bug in vkasr; the message says where                    */
} vkasr_status;

/* A static English description of a status code ("invalid argument", ...). Never NULL. */
VKASR_API const char *vkasr_status_string(vkasr_status status);

/* Filled by calls that create objects. message is empty on success. */
typedef struct vkasr_error {
    vkasr_status status;
    char message[1024];
} vkasr_error;

/* Library version, e.g. "0.1.0"; equals VKASR_VERSION_NUMBER of the header it was built with. */
VKASR_API const char *vkasr_version_string(void);
VKASR_API int vkasr_version_number(void);

/* ---------------------------------------------------------------------------------------------- */
/* Logging                                                                                        */

typedef enum vkasr_log_level {
    VKASR_LOG_DEBUG = 0,
    VKASR_LOG_INFO = 1,
    VKASR_LOG_WARN = 2,
    VKASR_LOG_ERROR = 3,
    VKASR_LOG_NONE = 4
} vkasr_log_level;

/* Receives one message (no trailing newline). May be called from the thread that called into vkasr. */
typedef void (*vkasr_log_callback)(vkasr_log_level level, const char *message, void *user_data);

/* ---------------------------------------------------------------------------------------------- */
/* Devices                                                                                        */

typedef struct vkasr_device_info {
    int index;                     /* position in Vulkan's enumeration; what --device N names   */
    char name[256];
    char type[16];                 /* "discrete", "integrated", "virtual", "cpu", "other"       */
    char driver[256];              /* driver name and info                                      */
    uint32_t api_version;          /* VK_MAKE_API_VERSION-encoded                               */
    uint32_t vendor_id, device_id;
    uint32_t heap_count;
    uint64_t heap_size[16];
    bool heap_device_local[16];
    uint32_t subgroup_size;
    uint32_t max_workgroup_count[3];
    uint32_t max_shared_memory;    /* bytes per workgroup                                       */
    uint64_t max_storage_buffer_range;
    uint64_t max_allocation_size;
    bool shader_int64;             /* required                                                  */
    bool buffer_device_address;    /* required                                                  */
    bool shader_float16;           /* f16 arithmetic and 16-bit storage: enables f16 precision  */
    bool cooperative_matrix_nv;    /* tensor cores through VK_NV_cooperative_matrix             */
    bool cooperative_matrix_khr;   /* VK_KHR_cooperative_matrix (reported, not yet used)         */
    bool timestamps;               /* compute-queue timestamps for profiling                    */
    bool usable;                   /* meets vkasr's requirements                                */
    char missing[256];             /* when !usable: what is missing, e.g. "Vulkan 1.2, shaderInt64" */
} vkasr_device_info;

/* Lists Vulkan devices into out[0..capacity-1]; *count receives the total number found (may exceed
 * capacity). out may be NULL when capacity is 0. Returns VKASR_ERR_NO_DEVICE when no Vulkan loader or
 * driver is present. */
VKASR_API vkasr_status vkasr_list_devices(vkasr_device_info *out, size_t capacity, size_t *count,
                                          vkasr_error *error);

/* ---------------------------------------------------------------------------------------------- */
/* Model                                                                                          */

typedef struct vkasr_model vkasr_model;
typedef struct vkasr_session vkasr_session;
typedef struct vkasr_result vkasr_result;

typedef enum vkasr_precision {
    VKASR_PRECISION_AUTO = 0, /* f16 where the device supports it, f32 otherwise */
    VKASR_PRECISION_F32 = 1,  /* f32 weights and arithmetic                     */
    VKASR_PRECISION_F16 = 2   /* f16 weights and matrix inputs, f32 accumulation, norms and softmax */
} vkasr_precision;

typedef struct vkasr_model_params {
    uint32_t struct_size;          /* sizeof(vkasr_model_params), set by the default function    */
    const char *device;            /* NULL or "": $VKASR_DEVICE, else the best usable device by type
                                      (discrete GPU, then integrated, virtual, other, CPU/lavapipe);
                                      "N": device index N; otherwise a case-insensitive name substring */
    vkasr_precision precision;
    vkasr_log_level log_level;     /* messages below this level are dropped (default WARN)      */
    vkasr_log_callback log_callback; /* NULL: print to stderr                                   */
    void *log_user_data;
    bool profile;                  /* per-dispatch GPU timestamps (also $VKASR_PROFILE=1)       */
    bool validation;               /* enable the Khronos validation layer (also $VKASR_VALIDATION=1);
                                      each message is logged and counted                         */
} vkasr_model_params;

VKASR_API vkasr_model_params vkasr_model_params_default(void);

/* Loads a model: a Hugging Face transformers Parakeet directory (config.json, model.safetensors or a
 * sharded index, tokenizer.json, preprocessor/processor config) or a vkasr GGUF file.
 * VKASR_ERR_NO_DEVICE also when the chosen device lacks a requested feature (f16 precision). */
VKASR_API vkasr_status vkasr_model_load(const char *path, const vkasr_model_params *params,
                                        vkasr_model **out_model, vkasr_error *error);
VKASR_API void vkasr_model_free(vkasr_model *model); /* NULL is a no-op */

typedef enum vkasr_head { VKASR_HEAD_TDT = 0, VKASR_HEAD_RNNT = 1, VKASR_HEAD_CTC = 2 } vkasr_head;

typedef struct vkasr_model_info {
    vkasr_head head;
    int d_model, n_layers, n_heads, ff_size, conv_kernel, n_mels, subsampling_channels;
    int vocab_size;                /* SentencePiece pieces, blank excluded                       */
    int pred_hidden, pred_layers;  /* transducers                                                */
    int n_durations;               /* TDT                                                        */
    int durations[16];
    int max_symbols_per_step;
    bool xscaling;
    uint64_t n_params;
    vkasr_precision precision;     /* the precision in use (never AUTO)                          */
    char device_name[256];
    uint64_t weight_bytes;         /* device memory held by weights                              */
} vkasr_model_info;

VKASR_API vkasr_status vkasr_model_get_info(const vkasr_model *model, vkasr_model_info *out);

/* ---------------------------------------------------------------------------------------------- */
/* Conversion                                                                                     */

typedef enum vkasr_weight_type { VKASR_WEIGHTS_F32 = 0, VKASR_WEIGHTS_F16 = 1 } vkasr_weight_type;

/* Converts a model (HF directory or GGUF) into vkasr's GGUF file: weights in `type` (norms, biases and
 * the decoder stay f32), batch-norm folded into the depthwise convolutions, layouts ready for the
 * kernels, hyper-parameters and vocabulary. Needs no GPU. A source that cannot be opened or read (a
 * missing file or shard) is VKASR_ERR_MODEL, so VKASR_ERR_IO always means the destination could not be
 * written; a destination that exists and is not a regular file (or a symlink to one) is refused. */
VKASR_API vkasr_status vkasr_convert(const char *src_path, const char *dst_gguf, vkasr_weight_type type,
                                     vkasr_error *error);

/* ---------------------------------------------------------------------------------------------- */
/* Sessions and transcription                                                                     */

VKASR_API vkasr_status vkasr_session_create(vkasr_model *model, vkasr_session **out_session,
                                            vkasr_error *error);
VKASR_API void vkasr_session_free(vkasr_session *session); /* NULL is a no-op */

/* The message of the last failed call on this session ("" if none). Valid until the next call. */
VKASR_API const char *vkasr_session_last_error(const vkasr_session *session);

typedef struct vkasr_progress {
    float fraction;                /* 0..1 over the whole call                                  */
    double audio_seconds_done;     /* audio fully transcribed so far                            */
    double audio_seconds_total;
    const char *stage;             /* "features", "encoder", "decoder"                          */
} vkasr_progress;

typedef void (*vkasr_progress_callback)(const vkasr_progress *progress, void *user_data);
/* Called each time a segment is complete; the result holds everything decoded so far. */
typedef void (*vkasr_segment_callback)(const vkasr_result *partial, size_t segment_index, void *user_data);
/* Polled between GPU submissions and decoding steps; return true to stop (VKASR_ABORTED). */
typedef bool (*vkasr_abort_callback)(void *user_data);

typedef struct vkasr_transcribe_params {
    uint32_t struct_size;
    vkasr_progress_callback progress_callback;
    void *progress_user_data;
    vkasr_segment_callback segment_callback;
    void *segment_user_data;
    vkasr_abort_callback abort_callback;
    void *abort_user_data;
    int max_symbols_per_step;      /* transducers: symbols emitted at one frame; 0 = model default */
    bool keep_features;            /* keep the normalized mel and the encoder output in the result */
} vkasr_transcribe_params;

VKASR_API vkasr_transcribe_params vkasr_transcribe_params_default(void);

/* Transcribes interleaved float samples in [-1, 1]; n_frames samples per channel. Any sample rate from
 * 1000 Hz to 2^24 Hz and any channel count: channels are averaged, the rate converted to 16 kHz. */
VKASR_API vkasr_status vkasr_transcribe_pcm(vkasr_session *session, const float *samples, size_t n_frames,
                                            int sample_rate, int channels,
                                            const vkasr_transcribe_params *params,
                                            const vkasr_result **out_result);

/* Transcribes an audio file in any format libsndfile reads (WAV, FLAC, OGG, MP3, ...). "-" reads a
 * WAV (or other libsndfile) stream from standard input. */
VKASR_API vkasr_status vkasr_transcribe_file(vkasr_session *session, const char *path,
                                             const vkasr_transcribe_params *params,
                                             const vkasr_result **out_result);

/* ---------------------------------------------------------------------------------------------- */
/* Results                                                                                        */

typedef struct vkasr_token {
    int32_t id;                    /* vocabulary id                                             */
    const char *piece;             /* SentencePiece piece, e.g. "▁hello"                        */
    const char *text;              /* the piece decoded alone, e.g. "hello"                     */
    int64_t frame;                 /* encoder frame of emission (80 ms for Parakeet)            */
    int32_t duration;              /* TDT predicted duration in frames; 1 otherwise             */
    double start, end;             /* seconds                                                   */
} vkasr_token;

typedef struct vkasr_word {
    const char *text;
    double start, end;
    size_t first_token, n_tokens;
} vkasr_word;

typedef struct vkasr_segment {
    const char *text;
    double start, end;
    size_t first_word, n_words;
} vkasr_segment;

typedef struct vkasr_timings {
    double audio_seconds;
    double load_ms;                /* decoding and resampling the input                         */
    double features_ms;            /* mel front end                                             */
    double encoder_ms;
    double decoder_ms;
    double total_ms;
    uint64_t peak_device_bytes;    /* weights + session scratch high-water mark                 */
} vkasr_timings;

VKASR_API const char *vkasr_result_text(const vkasr_result *result);
VKASR_API double vkasr_result_duration(const vkasr_result *result); /* input audio seconds */
/* true when the call that made this result was aborted (VKASR_ABORTED): it holds only what was decoded
 * before the stop. Decoding starts once the encoder has run over the whole input, so a call stopped
 * during the features or the encoder yields no tokens. */
VKASR_API bool vkasr_result_partial(const vkasr_result *result);
VKASR_API const vkasr_token *vkasr_result_tokens(const vkasr_result *result, size_t *count);
VKASR_API const vkasr_word *vkasr_result_words(const vkasr_result *result, size_t *count);
VKASR_API const vkasr_segment *vkasr_result_segments(const vkasr_result *result, size_t *count);
VKASR_API vkasr_timings vkasr_result_timings(const vkasr_result *result);
/* With keep_features: the normalized mel [frames][n_mels] and encoder output [frames][dim], row-major
 * float32; NULL otherwise. */
VKASR_API const float *vkasr_result_mel(const vkasr_result *result, size_t *frames, size_t *n_mels);
VKASR_API const float *vkasr_result_encoder(const vkasr_result *result, size_t *frames, size_t *dim);

/* ---------------------------------------------------------------------------------------------- */
/* Profiling (model loaded with profile = true)                                                   */

typedef struct vkasr_op_profile {
    char name[32];                 /* op (kernel family) name                                   */
    uint64_t calls;
    double gpu_ms;                 /* total GPU time of its dispatches                          */
} vkasr_op_profile;

/* Per-op GPU times accumulated by this session since it was created (or last reset). */
VKASR_API vkasr_status vkasr_session_profile(const vkasr_session *session, vkasr_op_profile *out,
                                             size_t capacity, size_t *count);
VKASR_API void vkasr_session_profile_reset(vkasr_session *session);

#ifdef __cplusplus
}
#endif

#endif /* VKASR_H */
