"""The C library through ctypes: where it is found, the structs of vkasr.h and the function prototypes.

Internal: the public API is in the other modules. Struct layouts mirror include/vkasr.h field by field.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_float, c_int, c_int32,
                    c_int64, c_size_t, c_uint32, c_uint64, c_void_p)
from typing import Optional

# Status codes (vkasr_status).
OK = 0
ABORTED = 1

ATTENTION_AUTO, ATTENTION_FULL, ATTENTION_LOCAL = 0, 1, 2
PRECISION_AUTO, PRECISION_F32, PRECISION_F16 = 0, 1, 2
DECODER_AUTO, DECODER_TDT, DECODER_RNNT, DECODER_CTC = 0, 1, 2, 3


class Error(Structure):
    _fields_ = [("status", c_int), ("message", c_char * 1024)]


class DeviceInfo(Structure):
    _fields_ = [
        ("index", c_int), ("name", c_char * 256), ("type", c_char * 16), ("driver", c_char * 256),
        ("api_version", c_uint32), ("vendor_id", c_uint32), ("device_id", c_uint32),
        ("heap_count", c_uint32), ("heap_size", c_uint64 * 16), ("heap_device_local", c_bool * 16),
        ("subgroup_size", c_uint32), ("max_workgroup_count", c_uint32 * 3), ("max_shared_memory", c_uint32),
        ("max_storage_buffer_range", c_uint64), ("max_allocation_size", c_uint64),
        ("shader_int64", c_bool), ("buffer_device_address", c_bool), ("shader_float16", c_bool),
        ("cooperative_matrix_nv", c_bool), ("cooperative_matrix_khr", c_bool), ("timestamps", c_bool),
        ("usable", c_bool), ("missing", c_char * 256), ("backend", c_char * 8), ("compute_capability", c_int),
    ]


LogCallback = ctypes.CFUNCTYPE(None, c_int, c_char_p, c_void_p)


class ModelParams(Structure):
    _fields_ = [
        ("struct_size", c_uint32), ("device", c_char_p), ("precision", c_int), ("log_level", c_int),
        ("log_callback", LogCallback), ("log_user_data", c_void_p), ("profile", c_bool), ("validation", c_bool),
        ("decoder", c_int), ("lookahead_ms", c_int), ("stream_slots", c_int),
    ]


class ModelInfo(Structure):
    _fields_ = [
        ("head", c_int), ("d_model", c_int), ("n_layers", c_int), ("n_heads", c_int), ("ff_size", c_int),
        ("conv_kernel", c_int), ("n_mels", c_int), ("subsampling_channels", c_int), ("vocab_size", c_int),
        ("pred_hidden", c_int), ("pred_layers", c_int), ("n_durations", c_int), ("durations", c_int * 16),
        ("max_symbols_per_step", c_int), ("xscaling", c_bool), ("n_params", c_uint64), ("precision", c_int),
        ("device_name", c_char * 256), ("weight_bytes", c_uint64),
    ]


class Progress(Structure):
    _fields_ = [("fraction", c_float), ("audio_seconds_done", c_double), ("audio_seconds_total", c_double),
                ("stage", c_char_p)]


class Token(Structure):
    _fields_ = [("id", c_int32), ("piece", c_char_p), ("text", c_char_p), ("frame", c_int64),
                ("duration", c_int32), ("start", c_double), ("end", c_double)]


class Word(Structure):
    _fields_ = [("text", c_char_p), ("start", c_double), ("end", c_double), ("first_token", c_size_t),
                ("n_tokens", c_size_t)]


class Segment(Structure):
    _fields_ = [("text", c_char_p), ("start", c_double), ("end", c_double), ("first_word", c_size_t),
                ("n_words", c_size_t)]


class SubtitleParams(Structure):
    _fields_ = [("struct_size", c_uint32), ("max_line_chars", c_int), ("max_lines", c_int),
                ("max_duration", c_double), ("min_duration", c_double), ("pause", c_double)]


class Timings(Structure):
    _fields_ = [("audio_seconds", c_double), ("load_ms", c_double), ("features_ms", c_double),
                ("encoder_ms", c_double), ("decoder_ms", c_double), ("total_ms", c_double),
                ("peak_device_bytes", c_uint64), ("planned_device_bytes", c_uint64)]


ProgressCallback = ctypes.CFUNCTYPE(None, POINTER(Progress), c_void_p)
AbortCallback = ctypes.CFUNCTYPE(c_bool, c_void_p)


class TranscribeParams(Structure):
    _fields_ = [
        ("struct_size", c_uint32), ("progress_callback", ProgressCallback), ("progress_user_data", c_void_p),
        ("segment_callback", c_void_p), ("segment_user_data", c_void_p),
        ("abort_callback", AbortCallback), ("abort_user_data", c_void_p),
        ("max_symbols_per_step", c_int), ("attention", c_int), ("attention_window", c_int),
        ("auto_full_seconds", c_double), ("max_memory", c_uint64), ("language", c_char_p),
    ]


EVENT_KINDS = ("end_of_utterance", "backchannel", "language")  # vkasr_event_kind order


class Event(Structure):
    _fields_ = [("kind", c_int), ("text", c_char_p), ("frame", c_int64), ("time", c_double),
                ("n_segments", c_size_t)]


class BatchInput(Structure):
    _fields_ = [("path", c_char_p), ("samples", POINTER(c_float)), ("n_frames", c_size_t),
                ("sample_rate", c_int), ("channels", c_int)]


class BatchParams(Structure):
    _fields_ = [("struct_size", c_uint32), ("max_batch", c_size_t), ("result_callback", c_void_p),
                ("result_user_data", c_void_p)]


class StreamUpdate(Structure):
    _fields_ = [("text", c_char_p), ("tokens", POINTER(Token)), ("n_tokens", c_size_t),
                ("words", POINTER(Word)), ("n_words", c_size_t), ("segment_end", c_bool),
                ("audio_end", c_double), ("events", POINTER(Event)), ("n_events", c_size_t)]


StreamCallback = ctypes.CFUNCTYPE(None, POINTER(StreamUpdate), c_void_p)


class StreamParams(Structure):
    _fields_ = [
        ("struct_size", c_uint32), ("hop_seconds", c_double), ("left_context_seconds", c_double),
        ("right_context_seconds", c_double), ("catch_up", c_bool), ("final_callback", StreamCallback),
        ("partial_callback", StreamCallback), ("user_data", c_void_p), ("max_symbols_per_step", c_int),
        ("language", c_char_p),
    ]


class StreamStats(Structure):
    _fields_ = [("audio_seconds", c_double), ("final_seconds", c_double), ("windows", c_uint64),
                ("window_seconds", c_double), ("compute_seconds", c_double)]


_P = c_void_p  # opaque handles: vkasr_model *, vkasr_session *, vkasr_result *, vkasr_stream *

_PROTOTYPES = {
    "vkasr_status_string": (c_char_p, [c_int]),
    "vkasr_version_string": (c_char_p, []),
    "vkasr_version_number": (c_int, []),
    "vkasr_list_devices": (c_int, [POINTER(DeviceInfo), c_size_t, POINTER(c_size_t), POINTER(Error)]),
    "vkasr_has_backend": (c_bool, [c_char_p]),
    "vkasr_model_params_default": (ModelParams, []),
    "vkasr_model_load": (c_int, [c_char_p, POINTER(ModelParams), POINTER(_P), POINTER(Error)]),
    "vkasr_model_free": (None, [_P]),
    "vkasr_model_get_info": (c_int, [_P, POINTER(ModelInfo)]),
    "vkasr_model_on_cpu": (c_bool, [_P]),
    "vkasr_session_create": (c_int, [_P, POINTER(_P), POINTER(Error)]),
    "vkasr_session_free": (None, [_P]),
    "vkasr_session_last_error": (c_char_p, [_P]),
    "vkasr_transcribe_params_default": (TranscribeParams, []),
    "vkasr_transcribe_pcm": (c_int, [_P, POINTER(c_float), c_size_t, c_int, c_int, POINTER(TranscribeParams),
                                     POINTER(_P)]),
    "vkasr_transcribe_file": (c_int, [_P, c_char_p, POINTER(TranscribeParams), POINTER(_P)]),
    "vkasr_audio_load": (c_int, [c_char_p, POINTER(POINTER(c_float)), POINTER(c_size_t), POINTER(Error)]),
    "vkasr_audio_load_memory": (c_int, [c_void_p, c_size_t, POINTER(POINTER(c_float)), POINTER(c_size_t),
                                        POINTER(Error)]),
    "vkasr_free": (None, [c_void_p]),
    "vkasr_default_model_path": (c_char_p, [ctypes.c_char_p, c_size_t]),
    "vkasr_result_text": (c_char_p, [_P]),
    "vkasr_result_duration": (c_double, [_P]),
    "vkasr_result_partial": (c_bool, [_P]),
    "vkasr_result_tokens": (POINTER(Token), [_P, POINTER(c_size_t)]),
    "vkasr_result_words": (POINTER(Word), [_P, POINTER(c_size_t)]),
    "vkasr_result_segments": (POINTER(Segment), [_P, POINTER(c_size_t)]),
    "vkasr_result_timings": (Timings, [_P]),
    "vkasr_result_attention": (c_int, [_P, POINTER(c_int)]),
    "vkasr_result_status": (c_int, [_P]),
    "vkasr_result_error": (c_char_p, [_P]),
    "vkasr_subtitle_params_default": (SubtitleParams, []),
    "vkasr_subtitles": (c_int, [POINTER(Word), c_size_t, POINTER(SubtitleParams), c_int, POINTER(c_void_p),
                                POINTER(c_size_t), POINTER(Error)]),
    "vkasr_result_language": (c_char_p, [_P]),
    "vkasr_result_events": (POINTER(Event), [_P, POINTER(c_size_t)]),
    "vkasr_model_check_language": (c_int, [_P, c_char_p, POINTER(c_size_t), POINTER(Error)]),
    "vkasr_model_language": (c_char_p, [_P, c_size_t]),
    "vkasr_batch_params_default": (BatchParams, []),
    "vkasr_transcribe_batch": (c_int, [_P, POINTER(BatchInput), c_size_t, POINTER(TranscribeParams),
                                       POINTER(BatchParams), POINTER(_P)]),
    "vkasr_stream_params_default": (StreamParams, []),
    "vkasr_stream_create": (c_int, [_P, POINTER(StreamParams), POINTER(_P), POINTER(Error)]),
    "vkasr_stream_push": (c_int, [_P, POINTER(c_float), c_size_t, c_int]),
    "vkasr_stream_finish": (c_int, [_P]),
    "vkasr_stream_cancel": (None, [_P]),
    "vkasr_stream_get_stats": (c_int, [_P, POINTER(StreamStats)]),
    "vkasr_stream_last_error": (c_char_p, [_P]),
    "vkasr_stream_free": (None, [_P]),
}

_lib: Optional[ctypes.CDLL] = None
_lib_lock = threading.Lock()


def library_candidates() -> list:
    """Where the library is looked for, in order: $VKASR_LIBRARY, next to this package, the system's."""
    env = os.environ.get("VKASR_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    for pattern in ("libvkasr.so", "libvkasr.so.*", "libvkasr*.dylib", "vkasr.dll"):
        found += sorted(glob.glob(os.path.join(here, pattern)))
    system = ctypes.util.find_library("vkasr")
    if system:
        found.append(system)
    return found


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use), its prototypes set and its struct sizes checked."""
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = _load()
        return _lib


def _load() -> ctypes.CDLL:
    candidates = library_candidates()
    if not candidates:
        raise ImportError("vkasr: libvkasr not found: set VKASR_LIBRARY to the path of libvkasr.so, install "
                          "the library (cmake --install), or install a wheel that bundles it")
    errors = []
    for path in candidates:
        try:
            dll = ctypes.CDLL(path)  # CDLL (not PyDLL): foreign calls release the GIL
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(dll, name)
            fn.restype = restype
            fn.argtypes = argtypes
        _check_sizes(dll, path)
        return dll
    raise ImportError("vkasr: cannot load libvkasr: " + "; ".join(errors))


def _check_sizes(dll: ctypes.CDLL, path: str) -> None:
    """The params structs carry their C size: a mismatch means this package and the library disagree."""
    for fn, cls in (("vkasr_model_params_default", ModelParams),
                    ("vkasr_transcribe_params_default", TranscribeParams),
                    ("vkasr_batch_params_default", BatchParams),
                    ("vkasr_stream_params_default", StreamParams),
                    ("vkasr_subtitle_params_default", SubtitleParams)):
        size = getattr(dll, fn)().struct_size
        if size != ctypes.sizeof(cls):
            raise ImportError(f"vkasr: {path}: {cls.__name__} is {size} bytes in the library, "
                              f"{ctypes.sizeof(cls)} in this package: versions do not match")
