/*
 * vkasr.h — the public C API of vkasr, speech recognition with NVIDIA Parakeet models (FastConformer
 * encoder; TDT, RNN-T and CTC heads) on a Vulkan 1.2 device with shaderInt64 and bufferDeviceAddress
 * (vkasr_device_info.usable and .missing say which devices qualify), on a plain-C CPU backend, or,
 * in a build with it, on CUDA.
 *
 * Objects
 *   vkasr_model    weights on one device plus the tokenizer; read-only once loaded, shared by any
 *                  number of threads.
 *   vkasr_session  the working state of one transcription at a time. Not thread-safe: one per thread.
 *                  Sessions on one GPU share its queue, so a second one fills the gaps the first leaves.
 *   vkasr_result   owned by its session; valid until the session's next transcribe call or its free.
 *   vkasr_stream   live transcription on a session: audio pushed from any thread, text back through
 *                  callbacks on the stream's worker thread.
 *
 * Errors. Fallible calls return a vkasr_status. Calls that create objects also fill an optional
 * vkasr_error whose message names what failed (file, tensor, field, device feature); session calls keep
 * it in the session (vkasr_session_last_error()). The library never exits or aborts the process, and
 * has no global mutable state apart from its pipeline workers.
 *
 * Threads. Keep vkasr calls off a UI thread. vkasr_transcribe_*() call their callbacks on the calling
 * thread, inside the call; a stream calls its callbacks on its worker thread. A callback must not call
 * into the same session: it copies what it needs and hands it on (GTK: g_idle_add; Qt: a queued
 * signal; examples/gtk). To cancel, let the abort callback read a flag (files) or call
 * vkasr_stream_cancel() (live).
 *
 * Lifetimes. Free streams, then their sessions, then the model (vkasr_session_free() also frees a
 * stream the session still has). Pointers a callback receives are valid during the callback only.
 * Join the threads that used vkasr before freeing a model: some GPU drivers run code in a thread's exit
 * that deadlocks against the device's destruction on another thread.
 *
 * Pipeline workers. On a GPU, the pipelines a first transcription needs compile in parallel on
 * process-wide threads the library starts ($VKASR_PIPELINE_THREADS, default the CPU count up to 16).
 * They idle until the process ends, so the library stays loaded once loaded (dlclose does not unload
 * it). A forked child must not use a model of its parent.
 *
 * Startup and memory. vkasr_model_load() reads and uploads the weights; the first transcription on a
 * device also creates its GPU pipelines (on CPU drivers, a good part of a second): load the model and
 * transcribe half a second of silence on a background thread at start to hide both. Device memory holds
 * the weights (vkasr_model_info.weight_bytes) plus each session's scratch, which follows the longest
 * input transcribed (vkasr_timings.peak_device_bytes); $VKASR_MAX_DEVICE_MEMORY_MIB caps the total.
 * vkasr_default_model_path() finds the default model installed with the library.
 *
 * Usage (examples/transcribe.c is the whole program, with its error handling):
 *
 *     vkasr_model_load("model.gguf", NULL, &model, &err);           // err.message on failure
 *     vkasr_session_create(model, &session, &err);
 *     vkasr_transcribe_file(session, "speech.wav", NULL, &result);  // vkasr_session_last_error()
 *     puts(vkasr_result_text(result));                              // and _tokens, _words, _segments
 *     vkasr_session_free(session);
 *     vkasr_model_free(model);
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
    VKASR_ERR_NO_DEVICE = -6,     /* no Vulkan device, or none with the required features; no
                                     CUDA device or NVIDIA driver (device "cuda")              */
    VKASR_ERR_VULKAN = -7,        /* a Vulkan call failed                                      */
    VKASR_ERR_DEVICE_MEMORY = -8, /* device memory exhausted                                   */
    VKASR_ERR_DEVICE_LOST = -9,   /* the device was lost (or a CUDA kernel faulted); free the
                                     session and the model                                     */
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

/* Receives one message (no trailing newline). Called on threads that call into vkasr and on the
 * library's pipeline workers (see "Pipeline workers" above), possibly at the same time: it must be
 * thread-safe. */
typedef void (*vkasr_log_callback)(vkasr_log_level level, const char *message, void *user_data);

/* ---------------------------------------------------------------------------------------------- */
/* Devices                                                                                        */

typedef struct vkasr_device_info {
    int index;                     /* Vulkan devices: position in Vulkan's enumeration, what
                                      --device N names; CUDA devices: the CUDA device number,
                                      what --device cuda:N names                                */
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
    char backend[8];               /* "vulkan" or "cuda"                                        */
    int compute_capability;        /* CUDA devices: major * 10 + minor (90 for an H100); 0 for
                                      Vulkan devices. For CUDA devices the Vulkan-specific fields
                                      describe the CUDA equivalents: subgroup_size is the warp size,
                                      max_workgroup_count the grid limits, heap 0 the GPU's memory,
                                      api_version 0                                             */
} vkasr_device_info;

/* Lists Vulkan devices into out[0..capacity-1], then the CPU backend (backend "cpu": name with its
 * threads, driver naming its kernels and BLAS, max_workgroup_count[0] its threads), then, in a library
 * built with the CUDA backend (-DVKASR_CUDA=ON), CUDA devices; *count receives the total number found
 * (may exceed capacity). out may be NULL when capacity is 0. The CPU backend is always there. */
VKASR_API vkasr_status vkasr_list_devices(vkasr_device_info *out, size_t capacity, size_t *count,
                                          vkasr_error *error);

/* Whether this build of the library has a backend: "vulkan", "cpu" and "ref" always, "cuda" when built with
 * -DVKASR_CUDA=ON (whether a GPU is present is another matter: vkasr_list_devices). */
VKASR_API bool vkasr_has_backend(const char *name);

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

/* Which head of a model to load (vkasr_model_params.decoder, vkasr_convert_decoder). A model has one
 * head, or two in a NeMo hybrid (.nemo EncDecHybridRNNTCTCBPEModel: a TDT or RNN-T transducer and an
 * auxiliary CTC head over the same encoder). AUTO: the only head, or the hybrid's transducer; any other
 * value the model lacks is refused with VKASR_ERR_MODEL naming the heads it has. */
typedef enum vkasr_decoder {
    VKASR_DECODER_AUTO = 0,
    VKASR_DECODER_TDT = 1,
    VKASR_DECODER_RNNT = 2,
    VKASR_DECODER_CTC = 3
} vkasr_decoder;

typedef struct vkasr_model_params {
    uint32_t struct_size;          /* sizeof(vkasr_model_params), set by the default function    */
    const char *device;            /* NULL or "": $VKASR_DEVICE, else the best usable Vulkan GPU by
                                      type (discrete, then integrated, virtual, other), else (none, or
                                      only a CPU driver such as lavapipe) the CPU backend; "vulkan":
                                      the best Vulkan device, lavapipe included; "N" or "vulkan:N":
                                      Vulkan device index N; "cpu" or "cpu:N": the CPU backend (N
                                      threads; default $VKASR_THREADS, else every online CPU); "ref":
                                      the plain-C reference backend (the test oracle, slow); "cuda" or
                                      "cuda:N": the CUDA backend (a build
                                      without it returns VKASR_ERR_UNSUPPORTED, see vkasr_has_backend);
                                      otherwise a case-insensitive Vulkan device name substring      */
    vkasr_precision precision;
    vkasr_log_level log_level;     /* messages below this level are dropped (default WARN)      */
    vkasr_log_callback log_callback; /* NULL: print to stderr                                   */
    void *log_user_data;
    bool profile;                  /* per-dispatch GPU timestamps (also $VKASR_PROFILE=1)       */
    bool validation;               /* enable the Khronos validation layer (also $VKASR_VALIDATION=1);
                                      each message is logged and counted                         */
    vkasr_decoder decoder;         /* the head to load (default AUTO); callers built against an
                                      older header (a smaller struct_size) get AUTO               */
    int lookahead_ms;              /* NVIDIA's cache-aware streaming models (att_context_style
                                      chunked_limited): which trained [left, right] context the
                                      encoder's chunked attention mask uses, by its lookahead
                                      (right + 1) x 80 ms (80, 160, 560, 1120 for right 0, 1, 6, 13);
                                      0 (default): the model's first pair, as NeMo does. A value not
                                      in the model's menu is VKASR_ERR_INVALID_ARG listing the menu;
                                      other models must leave it 0                                */
    int stream_slots;              /* cache-aware streaming models: how many live streams to plan for.
                                      Their caches live in pools of slots on the device, each pool
                                      advanced by one batched step per chunk: the first pool holds
                                      one stream, the next max(4, stream_slots - 1), each later one 4x
                                      the one before, made as streams arrive. 0 (default): pools of
                                      1, 4, 16, 64, ...; a server expecting many streams sets it so
                                      that they share two pools' steps instead of log4 as many; a
                                      plan that does not fit the device's memory falls back to the
                                      default sizes (logged as a warning). Negative:
                                      VKASR_ERR_INVALID_ARG                                       */
} vkasr_model_params;

VKASR_API vkasr_model_params vkasr_model_params_default(void);

/* Loads a model: a Hugging Face transformers Parakeet directory (config.json, model.safetensors or a
 * sharded index, tokenizer.json, preprocessor/processor config), a vkasr GGUF file or a NeMo .nemo
 * checkpoint (TDT, RNN-T, CTC or hybrid; recognised by content, a tar or gzip-compressed tar).
 * vkasr_model_info.head names the head loaded (params->decoder).
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
/* Checks a language for vkasr_transcribe_params.language before any audio: VKASR_OK when the model
 * takes it, else VKASR_ERR_INVALID_ARG with a message listing the model's languages. *n_languages (may
 * be NULL) receives the number of names in the model's language map (0: not a language-prompt model). */
VKASR_API vkasr_status vkasr_model_check_language(const vkasr_model *model, const char *language,
                                                  size_t *n_languages, vkasr_error *error);
/* Name i (< n_languages) of the model's language map ("en-US", "de", "auto", ...); NULL past the end. */
VKASR_API const char *vkasr_model_language(const vkasr_model *model, size_t i);
/* Whether the model computes on the host's CPU: the CPU backend ("cpu"), the reference ("ref") or a
 * CPU Vulkan driver such as lavapipe (type "cpu" in vkasr_list_devices). There, several sessions only
 * share the same cores, and long audio runs much slower than on a GPU. false for NULL. */
VKASR_API bool vkasr_model_on_cpu(const vkasr_model *model);

/* ---------------------------------------------------------------------------------------------- */
/* Conversion                                                                                     */

/* The encoder's matrix weight type in a converted file (GGML's tensor type ids). Q8_0: blocks of 32 (8.5
 * bits per weight); Q6_K, Q5_K, Q4_K: super-blocks of 256 (6.56, 5.5, 4.5 bits). A matrix whose row length
 * the block does not divide takes the nearest type that fits (K types Q8_0, Q8_0 F16; docs/model-format.md). */
typedef enum vkasr_weight_type {
    VKASR_WEIGHTS_F32 = 0,
    VKASR_WEIGHTS_F16 = 1,
    VKASR_WEIGHTS_Q8_0 = 8,
    VKASR_WEIGHTS_Q4_K = 12,
    VKASR_WEIGHTS_Q5_K = 13,
    VKASR_WEIGHTS_Q6_K = 14
} vkasr_weight_type;

/* Converts a model (HF directory, .nemo checkpoint or f32/f16 GGUF) into vkasr's GGUF file: the encoder's
 * matrices in `type` (a quantized type also quantizes the decoder's and joint's; F16 keeps them f32),
 * everything else f32, batch-norm folded, layouts ready for the kernels. Needs no GPU; the same input
 * gives the same bytes. Errors: an already quantized source is VKASR_ERR_INVALID_ARG (quantize from
 * f32/f16); an unreadable source (a missing file or shard) VKASR_ERR_MODEL, so VKASR_ERR_IO always means
 * the destination; a destination that exists and is not a regular file (or a symlink to one) is refused.
 * On success error->message (when given) is a one-line summary: file size, bits per weight. */
VKASR_API vkasr_status vkasr_convert(const char *src_path, const char *dst_gguf, vkasr_weight_type type,
                                     vkasr_error *error);
/* vkasr_convert with a choice of head: a GGUF file holds one head, so a hybrid .nemo converts its
 * transducer (AUTO) or, with VKASR_DECODER_CTC, its CTC head; convert twice for both. A head the
 * source lacks is VKASR_ERR_MODEL. */
VKASR_API vkasr_status vkasr_convert_decoder(const char *src_path, const char *dst_gguf, vkasr_weight_type type,
                                             vkasr_decoder decoder, vkasr_error *error);

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
/* Called each time a segment is complete; the result holds everything decoded so far. Transducers
 * report their tokens in batches (see the abort callback), so several segments may complete at once. */
typedef void (*vkasr_segment_callback)(const vkasr_result *partial, size_t segment_index, void *user_data);
/* Polled between GPU submissions and, while decoding, at each return of the decoder to the host (a
 * transducer's greedy search runs on the device and returns about every 20 s of audio); return true to
 * stop (VKASR_ABORTED). */
typedef bool (*vkasr_abort_callback)(void *user_data);

/* Self-attention over the encoder frames (80 ms each). Full (NeMo rel_pos, how Parakeet models are
 * trained): every frame sees every other; time grows with the square of the length, memory linearly.
 * Local (NeMo rel_pos_local_attn, context [w, w]): w frames on either side; time and memory linear,
 * results close to full attention but not identical; NeMo recommends it beyond 24 minutes. */
typedef enum vkasr_attention {
    VKASR_ATTENTION_AUTO = 0,  /* full up to auto_full_seconds, local beyond; a model whose
                                  configuration ships local attention keeps it                   */
    VKASR_ATTENTION_FULL = 1,
    VKASR_ATTENTION_LOCAL = 2
} vkasr_attention;

typedef struct vkasr_transcribe_params {
    uint32_t struct_size;
    vkasr_progress_callback progress_callback;
    void *progress_user_data;
    vkasr_segment_callback segment_callback;
    void *segment_user_data;
    vkasr_abort_callback abort_callback;
    void *abort_user_data;
    int max_symbols_per_step;      /* transducers: symbols emitted at one frame; 0 = model default */
    vkasr_attention attention;     /* default AUTO                                              */
    int attention_window;          /* local attention's w in encoder frames; 0 = the model's
                                      context, else 128 (NeMo's documented [128, 128])           */
    double auto_full_seconds;      /* AUTO: the longest input given full attention; 0 = 1440 (24 min) */
    uint64_t max_memory;           /* device bytes this call may use, weights included; 0: what the
                                      device offers (VK_EXT_memory_budget's budget, else the heap).
                                      The audio runs in chunks sized to fit (same results); where
                                      even the smallest do not, VKASR_ERR_DEVICE_MEMORY names the
                                      bytes needed and available before anything is allocated.     */
    const char *language;          /* language-prompt models (Nemotron 3.5): a name of the model's
                                      language map ("en-US", "de", ...; ASCII case ignored) or "auto"
                                      (detect: the model writes <xx-XX> tags, reported by
                                      vkasr_result_language() and kept out of the text); NULL or "":
                                      "auto". A name the map lacks is VKASR_ERR_INVALID_ARG listing
                                      the map. Other models take NULL, "" or "auto" only.           */
} vkasr_transcribe_params;

VKASR_API vkasr_transcribe_params vkasr_transcribe_params_default(void);

/* Transcribes interleaved float samples in [-1, 1]; n_frames samples per channel. Any sample rate from
 * 1000 Hz to 2^24 Hz and any channel count: channels are averaged, the rate converted to 16 kHz. Mono
 * 16 kHz samples are read in place during the call (no host copy); they are never written. */
VKASR_API vkasr_status vkasr_transcribe_pcm(vkasr_session *session, const float *samples, size_t n_frames,
                                            int sample_rate, int channels,
                                            const vkasr_transcribe_params *params,
                                            const vkasr_result **out_result);

/* Transcribes an audio file in any format libsndfile reads (WAV, FLAC, OGG, MP3, ...). "-" reads a
 * WAV (or other libsndfile) stream from standard input. */
VKASR_API vkasr_status vkasr_transcribe_file(vkasr_session *session, const char *path,
                                             const vkasr_transcribe_params *params,
                                             const vkasr_result **out_result);

/* Decodes an audio file (any format vkasr_transcribe_file() reads; "-" is standard input) into 16 kHz
 * mono float samples in *out_samples (malloc'd; release with vkasr_free()). For applications that feed
 * files to a stream, show a waveform or play the audio. Any number of threads may decode files at once
 * (this and vkasr_transcribe_file()); an error names the file's own reason, unless code outside vkasr
 * opens files with libsndfile at the same moment (its open errors are one process-wide value). */
VKASR_API vkasr_status vkasr_audio_load(const char *path, float **out_samples, size_t *out_n,
                                        vkasr_error *error);
/* Decodes an audio file held in memory (the bytes of any format vkasr_audio_load() reads: an upload,
 * an archive member, a resource) into 16 kHz mono float samples in *out_samples (malloc'd; release
 * with vkasr_free()). The bytes are only read, during the call; the caller keeps them. Messages name
 * the input "audio bytes": VKASR_ERR_AUDIO for 0 bytes, a format libsndfile does not recognise
 * ("audio bytes: cannot decode audio: Format not recognised."), a malformed file or a non-finite
 * sample, and for more than 2^63-1 bytes; VKASR_ERR_INVALID_ARG for NULL data with size > 0 or NULL
 * outputs. A valid file with no frames gives VKASR_OK, *out_samples NULL and *out_n 0. Threads as for
 * vkasr_audio_load(). */
VKASR_API vkasr_status vkasr_audio_load_memory(const void *data, size_t size, float **out_samples, size_t *out_n,
                                               vkasr_error *error);
VKASR_API void vkasr_free(void *p); /* memory vkasr allocated for the caller; NULL is a no-op */

/* The model to use when the user names none: $VKASR_MODEL when set, else the default model installed
 * with the library (<datadir>/vkasr/vkasr-tdt-tiny-en.gguf, e.g. /usr/local/share/vkasr/...), else the
 * one of the source tree the library was built from. Copies the path into buf and returns buf, or
 * returns NULL when no such file exists or buf is too small. */
VKASR_API const char *vkasr_default_model_path(char *buf, size_t size);

/* Models by name, from the Hugging Face hub's cache (shared with Python's huggingface_hub; no network:
 * `vkasr pull` downloads). A name is an alias of the index (built in, extended by the JSON file
 * $VKASR_PULL_INDEX) or "org/repo", "org/repo:FILE" or "org/repo:QUANT" (a GGUF type such as q8_0).
 * vkasr_model_load() and vkasr_convert() accept a name wherever no file or directory of that path
 * exists. */
typedef struct vkasr_hub_model {
    char aliases[128];   /* the index's names for it, comma-separated; "" for org/repo names       */
    char repo[128];      /* "org/name"                                                            */
    char file[256];      /* the file in the repository; "": chosen by vkasr_hub_pick()            */
    char quant[32];      /* org/repo:QUANT: the GGUF type asked; "" none                          */
    char revision[64];   /* branch, tag or 40-hex commit ("main" unless the index pins one)       */
    char sha256[65];     /* lowercase hex; "": unknown (the hub's X-Linked-Etag then stands in)   */
    uint64_t size;       /* bytes; 0: unknown                                                     */
} vkasr_hub_model;
/* Parses a name into *out (aliases looked up; VKASR_ERR_INVALID_ARG names what is wrong). */
VKASR_API vkasr_status vkasr_hub_lookup(const char *name, vkasr_hub_model *out, vkasr_error *error);
/* The index's entries (built-in and $VKASR_PULL_INDEX's): copies up to max into out (NULL: none) and
 * returns how many there are. */
VKASR_API size_t vkasr_hub_index(vkasr_hub_model *out, size_t max);
/* The cache directory: $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub; NULL when buf is too small or no home is known. */
VKASR_API const char *vkasr_hub_cache_dir(char *buf, size_t size);
/* Which of a repository's files (paths in it) vkasr loads: the GGUF of type quant (NULL or "": the
 * f16 one, else f32, else q8_0, else the first), else a .nemo checkpoint; its index, or -1 when the
 * repository is a transformers directory (config.json and *.safetensors), or -2 when none fits. */
VKASR_API int vkasr_hub_pick(const char *const *files, size_t n, const char *quant);
/* The cached file or snapshot directory a name stands for, copied into path. VKASR_ERR_IO with
 * "model 'NAME' is not in the Hugging Face cache (DIR): run `vkasr pull NAME`" when it is not there. */
VKASR_API vkasr_status vkasr_hub_resolve(const char *name, char *path, size_t size, vkasr_error *error);

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
    uint64_t peak_device_bytes;    /* device memory held during the call: weights + the session's
                                      scratch (kept between calls unless a call needs far less)  */
    uint64_t planned_device_bytes; /* the call's memory plan: weights + planned scratch         */
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
/* The attention the call used: VKASR_ATTENTION_FULL or VKASR_ATTENTION_LOCAL (never AUTO); *window
 * (may be NULL) receives w for local attention, 0 for full. AUTO for a call that failed before
 * choosing. */
VKASR_API vkasr_attention vkasr_result_attention(const vkasr_result *result, int *window);
/* A batch input's outcome (vkasr_transcribe_batch()): VKASR_OK, VKASR_ABORTED (stopped part-way or never
 * started: partial), or the error that input met (its audio could not be decoded, ...), with the message
 * naming the input. Results of the single-input calls: VKASR_OK or VKASR_ABORTED, message "". */
VKASR_API vkasr_status vkasr_result_status(const vkasr_result *result);
VKASR_API const char *vkasr_result_error(const vkasr_result *result);
/* The language a language-prompt model detected ("auto"): the first <xx-XX> tag it wrote ("en-US"), or
 * NULL when it wrote none (a language was chosen, or another model). */
VKASR_API const char *vkasr_result_language(const vkasr_result *result);

/* Tokens that are events, not text: kept out of the text, words and segments, listed here in order. */
typedef enum vkasr_event_kind {
    VKASR_EVENT_END_OF_UTTERANCE = 0, /* <EOU> (parakeet_realtime_eou): the utterance ended; the segment
                                         before it ends there. Offline runs decode on after it as
                                         NeMo's transcribe() does (no decoder reset)                   */
    VKASR_EVENT_BACKCHANNEL = 1,      /* <EOB>: the utterance was a backchannel ("uh-huh"); it also ends
                                         the segment                                                   */
    VKASR_EVENT_LANGUAGE = 2          /* a language tag <xx-XX> of a language-prompt model            */
} vkasr_event_kind;

typedef struct vkasr_event {
    vkasr_event_kind kind;
    const char *text;              /* the piece ("<EOU>", "<EOB>") or the language ("en-US")         */
    int64_t frame;                 /* encoder frame of emission                                     */
    double time;                   /* seconds                                                       */
    size_t n_segments;             /* segments of the result that end before it                     */
} vkasr_event;

VKASR_API const vkasr_event *vkasr_result_events(const vkasr_result *result, size_t *count);

/* ---------------------------------------------------------------------------------------------- */
/* Subtitles                                                                                      */
/*
 * Subtitle cues (SRT, WebVTT) made from timed words by subtitle conventions; the CLI, the server and
 * the Python package all make theirs here. Words are taken in order into a cue until one of:
 *   - the previous word ends a sentence (its last character is . ? or !);
 *   - the silence before the word (its start minus the previous word's end) is at least `pause`;
 *   - with the word, the cue's text (words joined by one space) no longer fits in max_lines lines of
 *     max_line_chars characters (code points), or the cue would last longer than max_duration (the
 *     word's end minus the cue's first word's start). Such a cue ends after its last word that ends
 *     in , ; or : when that word closes at least half of the cue's characters, else before the word.
 * A cue is never split inside a word; a single word over a limit makes a cue of its own. A cue longer
 * than one line is broken in two at the word boundary whose lines differ least in length, a boundary
 * after punctuation (, ; : . ? !) counting max_line_chars / 4 characters closer; both lines must fit;
 * ties go to the shorter first line. Each cue lasts at least min(min_duration, the time to the next
 * cue's start): its end moves out to that where its words end sooner. Cue text is valid UTF-8: bytes
 * that do not start well-formed UTF-8 become U+FFFD and control characters spaces.
 */
typedef struct vkasr_subtitle_params {
    uint32_t struct_size;
    int max_line_chars;            /* characters per line at most; default 42 (1..1000)             */
    int max_lines;                 /* lines per cue at most: 1 or 2 (default)                       */
    double max_duration;           /* seconds a cue lasts at most; default 7                        */
    double min_duration;           /* seconds a cue lasts at least (see above); default 1, at most
                                      max_duration                                                  */
    double pause;                  /* a silence of at least this many seconds starts a new cue;
                                      default 0.5                                                   */
} vkasr_subtitle_params;

VKASR_API vkasr_subtitle_params vkasr_subtitle_params_default(void);

typedef struct vkasr_cue {
    const char *text;              /* one or two lines, separated by '\n'                          */
    double start, end;             /* seconds                                                       */
    size_t first_word, n_words;    /* the words it holds                                            */
} vkasr_cue;

typedef enum vkasr_subtitle_format { VKASR_SUBTITLE_SRT = 0, VKASR_SUBTITLE_VTT = 1 } vkasr_subtitle_format;

/* The cues of n words (in time order: finite times, 0 <= start <= end, starts non-decreasing) into
 * *out_cues (release with vkasr_cues_free()) and *out_n. params NULL: the defaults. No words: no cues
 * (*out_cues NULL). VKASR_ERR_INVALID_ARG names the parameter or the word that is out of range. */
VKASR_API vkasr_status vkasr_subtitle_cues(const vkasr_word *words, size_t n, const vkasr_subtitle_params *params,
                                           vkasr_cue **out_cues, size_t *out_n, vkasr_error *error);
VKASR_API void vkasr_cues_free(vkasr_cue *cues, size_t n); /* NULL is a no-op */

/* The cues of vkasr_subtitle_cues() as a SubRip or WebVTT file (in WebVTT, & < > escaped; a cue of
 * empty words only is left out), into *out (NUL-terminated, release with vkasr_free()) and *out_len
 * (its length without the NUL). */
VKASR_API vkasr_status vkasr_subtitles(const vkasr_word *words, size_t n, const vkasr_subtitle_params *params,
                                       vkasr_subtitle_format format, char **out, size_t *out_len,
                                       vkasr_error *error);

/* ---------------------------------------------------------------------------------------------- */
/* Many inputs at once                                                                            */
/*
 * vkasr_transcribe_batch() transcribes many inputs in one call, faster than one by one: it decodes them,
 * sorts them by length and runs packed batches (inputs concatenated along time, no padding; every stage
 * keeps to each input's own frames). Each input comes out as a call on it alone would give it (the same
 * tokens; in f32 the same encoder output, bit for bit). Results come back in input order.
 *
 * A bad input (cannot be opened or decoded, a non-finite sample) gets its own error result and the
 * others go on; a batch that fails on the device is retried in halves, down to single inputs. Progress
 * reports over all inputs; the abort callback stops the call (the running batch keeps what was decoded,
 * marked partial; inputs not started are VKASR_ABORTED). Segment callbacks are refused
 * (VKASR_ERR_INVALID_ARG). The decoded audio of all inputs is held during the call (64 KB per second),
 * so pass a few hundred at a time; device memory is planned per batch (max_memory applies to each).
 */
typedef struct vkasr_batch_input {
    const char *path;              /* an audio file (any format vkasr_transcribe_file() reads; "-" is
                                      standard input), or NULL: the samples below                 */
    const float *samples;          /* interleaved float samples in [-1, 1], n_frames per channel     */
    size_t n_frames;
    int sample_rate, channels;
} vkasr_batch_input;

/* Called once per input as soon as its result is final, in the order the batches finish (not input
 * order; index says which), on the calling thread. The result is valid until the session's next call. */
typedef void (*vkasr_batch_callback)(size_t index, const vkasr_result *result, void *user_data);

typedef struct vkasr_batch_params {
    uint32_t struct_size;
    size_t max_batch;              /* inputs per device batch at most; 0 (default): as many as the
                                      device's memory (or max_memory) holds, up to 256 inputs or an
                                      hour of audio per batch; 1: one input at a time              */
    vkasr_batch_callback result_callback; /* NULL: none                                             */
    void *result_user_data;
} vkasr_batch_params;

VKASR_API vkasr_batch_params vkasr_batch_params_default(void);

/* Transcribes n_inputs inputs; out_results[i] (an array of n_inputs the caller provides) receives input
 * i's result, owned by the session (valid until its next transcribe call or vkasr_session_free()), whose
 * vkasr_result_status() says how it went. Returns VKASR_OK when every input was transcribed, VKASR_ABORTED
 * when the abort callback stopped the call, VKASR_ERR_AUDIO (or the first input error) when some inputs
 * failed and the others were transcribed, or an error before any input ran (bad arguments: then the
 * out_results are NULL). Timings: an input's load_ms and audio_seconds are its own; features, encoder and
 * decoder times, total_ms and the device memory figures are those of the batch it ran in. */
VKASR_API vkasr_status vkasr_transcribe_batch(vkasr_session *session, const vkasr_batch_input *inputs,
                                              size_t n_inputs, const vkasr_transcribe_params *params,
                                              const vkasr_batch_params *batch_params,
                                              const vkasr_result **out_results);

/* ---------------------------------------------------------------------------------------------- */
/* Live transcription                                                                             */
/*
 * A stream transcribes audio pushed as it arrives (a microphone, a call) and reports final text, which
 * will not change, and partial text, which may, within about a second.
 *
 * How, cache-aware streaming models (NVIDIA's chunked_limited ones, e.g. nemotron-speech-streaming):
 * the stream runs the model's streaming session, one encoder step per chunk of (R+1) x 80 ms against
 * per-layer caches on the device, each frame computed once and equal to the offline run's;
 * vkasr_model_params.lookahead_ms picks the trained chunk, and hop, left and right contexts and
 * catch_up do not apply. A frame's tokens come at most a chunk plus 16 ms after its audio, plus
 * compute; a word is final once the next word begins (or the stream finishes), the word in progress
 * is the partial text. All streams of one model (each on its own session) share the model's stream
 * caches on its device and advance together: a step runs every stream that has a whole chunk, so a
 * server gets one batched step per chunk period however many streams it holds. The caches are made in
 * pools of 1, 4, 16, ... streams as streams arrive and stay until vkasr_model_free(). stats.windows
 * counts the stream's steps.
 *
 * How, every other Parakeet model: it attends to the whole input, so a stream transcribes overlapping
 * windows of the audio received so far (NeMo's buffered inference), one per hop of new audio:
 *
 *     |<---- left context ---->|<-- not yet final, about one hop -->|<-- right context -->|
 *                                                                   ^ horizon
 *
 * Words that end by the horizon become final; later ones are partial, redone by the next window.
 * Windows are merged by the words' encoder frames (80 ms), so that each word is made final exactly once
 * even where neighbouring windows place it a frame apart (docs/live.md states the condition).
 *
 * Latency and cost. A word becomes final between right_context and hop + right_context seconds after
 * it ends, plus a window's compute time (defaults: 0.32-0.96 s). Each second of audio is transcribed
 * (left + hop + right) / hop times (defaults: 5.5). When the device is too slow for the hop, catch_up
 * (default) lets the next window take all the audio that arrived meanwhile, up to 16 hops; a device
 * slower than real time falls behind regardless.
 *
 * Threads. vkasr_stream_create() starts the stream's worker thread, which runs every window (for a
 * cache-aware model, steps that may advance other streams of the model too) and calls every callback; vkasr_stream_finish() waits for it. vkasr_stream_push() and vkasr_stream_cancel() may
 * be called from any thread, concurrently, also from a callback; push copies the samples and returns at
 * once. The session belongs to the stream until vkasr_stream_free() (other calls on it fail with
 * VKASR_ERR_INVALID_ARG); the model may still serve other sessions. Callbacks must not call
 * vkasr_stream_finish() or vkasr_stream_free() (they return VKASR_ERR_INVALID_ARG / do nothing there).
 */

typedef struct vkasr_stream vkasr_stream;

/* What a callback receives. Everything it points to is valid only during the callback. Times are in
 * seconds from the stream's first sample; words[i].first_token indexes tokens. */
typedef struct vkasr_stream_update {
    const char *text;              /* final: the words that just became final; partial: the tentative
                                      words after everything final ("" when there are none)         */
    const vkasr_token *tokens;
    size_t n_tokens;
    const vkasr_word *words;
    size_t n_words;
    bool segment_end;              /* final only: the segment (a caption line) ends after these words:
                                      a sentence ended, a pause of 1 s followed, 30 s passed, or the
                                      stream finished. May come with no words (the pause was seen
                                      after the last words were made final).                        */
    double audio_end;              /* the end of the audio the window saw, in stream seconds         */
    const vkasr_event *events;     /* event tokens among these words and right after them
                                      (vkasr_result_events; n_segments counts within this update); an
                                      end of utterance or a backchannel ends the update and sets
                                      segment_end; a language tag comes with the first word after it.
                                      For a cache-aware model, a word is final once the next token
                                      follows it, and the updates do not depend on timing          */
    size_t n_events;
} vkasr_stream_update;

typedef void (*vkasr_stream_callback)(const vkasr_stream_update *update, void *user_data);

typedef struct vkasr_stream_params {
    uint32_t struct_size;
    double hop_seconds;            /* new audio per window (default 0.64)                            */
    double left_context_seconds;   /* audio before the undecided part that a window repeats
                                      (default 2.56)                                                 */
    double right_context_seconds;  /* audio after the horizon (default 0.32): words in it are partial */
    bool catch_up;                 /* default true: when windows fall behind, the next one takes all
                                      the audio that arrived (timing-dependent windows, bounded
                                      latency); false: every hop is transcribed in turn, so the text
                                      depends only on the audio (tests), but a slow device lags     */
    vkasr_stream_callback final_callback;   /* words that will not change (NULL: none)             */
    vkasr_stream_callback partial_callback; /* called after each window whose partial text changed,
                                               and after each final update                          */
    void *user_data;
    int max_symbols_per_step;      /* as in vkasr_transcribe_params                                  */
    const char *language;          /* as in vkasr_transcribe_params                                  */
} vkasr_stream_params;

/* Durations are rounded to whole encoder frames (80 ms); each must be at least one frame. The right
 * context is what keeps a word that the window's end cuts off from becoming final. */
VKASR_API vkasr_stream_params vkasr_stream_params_default(void);

typedef struct vkasr_stream_stats {
    double audio_seconds;          /* pushed so far (at 16 kHz)                                      */
    double final_seconds;          /* the text of the audio before this point is final               */
    uint64_t windows;              /* windows transcribed                                             */
    double window_seconds;         /* audio in those windows, in total                               */
    double compute_seconds;        /* wall time the worker spent transcribing them (on a GPU, an upper
                                      bound of the GPU time); a cache-aware model's stream: its share of
                                      the batched steps it was in (a step's time over its streams);
                                      / audio_seconds = cost per audio second                          */
} vkasr_stream_stats;

/* Starts a stream on a session (which it owns until vkasr_stream_free()) and its worker thread. */
VKASR_API vkasr_status vkasr_stream_create(vkasr_session *session, const vkasr_stream_params *params,
                                           vkasr_stream **out_stream, vkasr_error *error);

/* Appends mono float samples in [-1, 1] at sample_rate (resampled to 16 kHz; the rate must not change
 * within a stream). Any thread. Returns VKASR_ERR_INVALID_ARG for bad arguments or after finish,
 * VKASR_ERR_AUDIO for non-finite samples, VKASR_ABORTED after a cancel, and the worker's error once a
 * window failed (vkasr_stream_last_error() says why; the stream then stops). */
VKASR_API vkasr_status vkasr_stream_push(vkasr_stream *stream, const float *samples, size_t n, int sample_rate);

/* End of input: transcribes what is left (the last window has no right context, so everything becomes
 * final and the open segment ends), waits until the last callback has returned, and stops the worker.
 * Returns VKASR_OK, VKASR_ABORTED after a cancel, or the worker's error. Not from a callback. */
VKASR_API vkasr_status vkasr_stream_finish(vkasr_stream *stream);

/* Asks the stream to stop as soon as possible: the window in progress is abandoned at its next check
 * (between encoder blocks or decoding steps), pushed audio not yet transcribed is dropped, and no final
 * update follows. Returns at once; any thread, also from a callback. Callbacks may still be running
 * until vkasr_stream_finish() or vkasr_stream_free() returns. */
VKASR_API void vkasr_stream_cancel(vkasr_stream *stream);

/* A snapshot of the stream's figures; any thread. */
VKASR_API vkasr_status vkasr_stream_get_stats(vkasr_stream *stream, vkasr_stream_stats *out);

/* Why the worker failed ("" if it did not). Valid until vkasr_stream_free(). */
VKASR_API const char *vkasr_stream_last_error(vkasr_stream *stream);

/* Cancels (if not finished), waits for the worker, frees the stream and gives the session back. NULL is
 * a no-op; not from a callback (there it does nothing). No other call on the stream may run meanwhile
 * or follow (push, cancel and stats from other threads must have returned). */
VKASR_API void vkasr_stream_free(vkasr_stream *stream);

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
