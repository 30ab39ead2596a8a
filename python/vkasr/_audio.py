"""Audio inputs: a path, the bytes of an audio file, or samples (numpy or any float32/int16 buffer),
turned into what the C calls take (a path, or interleaved float32 frames; bytes are decoded by the
library from memory)."""
from __future__ import annotations

import array
import ctypes
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from . import _lib
from ._errors import Error, error_for

AudioInput = Union[str, "os.PathLike[str]", bytes, bytearray, Any]


@dataclass
class Prepared:
    """One input ready for C: `path` (bytes) or `samples` (a float32 buffer, n_frames x channels), or the
    `error` its bytes met in decoding (raised by a single call, the input's own result in a batch)."""

    path: Optional[bytes] = None
    samples: Any = None  # a ctypes float array or a numpy array kept alive during the call
    pointer: Any = None  # POINTER(c_float) to the samples
    n_frames: int = 0
    channels: int = 1
    sample_rate: int = 0
    file: bytes = b""  # the "file" name of the transcript (a path input's bytes)
    error: Optional[Error] = None
    _owned: Any = field(default=None, repr=False)  # samples the library allocated (vkasr_free)

    def close(self) -> None:
        if self._owned is not None:
            _lib.lib().vkasr_free(self._owned)
            self._owned = None
            self.pointer = None


def _numpy() -> Any:
    """numpy when it is installed and already imported or importable; None otherwise."""
    np = sys.modules.get("numpy")
    if np is None:
        try:
            import numpy as np  # type: ignore[no-redef]
        except ImportError:
            return None
    return np


def prepare(audio: AudioInput, sample_rate: Optional[int]) -> Prepared:
    """Prepares one input; close() the result after the call (it may hold decoded samples)."""
    if isinstance(audio, (str, os.PathLike)):
        if sample_rate is not None:
            raise ValueError("sample_rate is for sample inputs; a file says its own rate")
        p = os.fsencode(audio)
        return Prepared(path=p, file=p)
    if isinstance(audio, (bytes, bytearray)):
        if sample_rate is not None:
            raise ValueError("sample_rate is for sample inputs; bytes are an audio file, which says its own rate")
        return _file_bytes(bytes(audio))
    return _samples(audio, sample_rate)


def _file_bytes(data: bytes) -> Prepared:
    """Bytes of an audio file, decoded by the library from memory (vkasr_audio_load_memory) into 16 kHz
    mono samples; a decoding error ("audio bytes: ...") is kept in the result."""
    L = _lib.lib()
    x, n, err = ctypes.POINTER(ctypes.c_float)(), ctypes.c_size_t(), _lib.Error()
    st = L.vkasr_audio_load_memory(data, len(data), ctypes.byref(x), ctypes.byref(n), ctypes.byref(err))
    if st != _lib.OK:
        # an empty 16 kHz input in its place, so that a batch still runs it (and reports this error)
        return Prepared(error=error_for(st, err.message.decode("utf-8", "replace")), sample_rate=16000)
    return Prepared(pointer=x, n_frames=n.value, channels=1, sample_rate=16000, _owned=x if x else None)


def _samples(audio: Any, sample_rate: Optional[int]) -> Prepared:
    if sample_rate is None:
        raise ValueError("samples need sample_rate= (Hz)")
    if not isinstance(sample_rate, int) or isinstance(sample_rate, bool):
        raise ValueError(f"sample_rate {sample_rate!r}: an int (Hz)")  # the library checks its range
    np = _numpy()
    if np is not None and isinstance(audio, np.ndarray):
        return _from_numpy(np, audio, sample_rate)
    try:
        mv = memoryview(audio)
    except TypeError:
        raise TypeError(f"audio: a path, bytes of an audio file, or samples (a numpy array or a float32/int16 "
                        f"buffer), not {type(audio).__name__}") from None
    if np is not None:  # any buffer through numpy (strided, 2-D, ...)
        return _from_numpy(np, np.asarray(mv), sample_rate)
    return _from_buffer(mv, sample_rate)


def _from_numpy(np: Any, a: Any, sample_rate: int) -> Prepared:
    if a.ndim not in (1, 2):
        raise ValueError(f"samples: shape {a.shape}: [n] (mono) or [n, channels]")
    if a.dtype == np.int16:
        a = a.astype(np.float32) / np.float32(32768.0)
    elif a.dtype in (np.float32, np.float64):
        a = a.astype(np.float32, copy=False)
    else:
        raise ValueError(f"samples: dtype {a.dtype}: float32, float64 or int16")
    a = np.ascontiguousarray(a)
    channels = 1 if a.ndim == 1 else a.shape[1]
    if channels < 1:
        raise ValueError("samples: no channels")
    ptr = a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    return Prepared(samples=a, pointer=ptr, n_frames=a.shape[0], channels=channels, sample_rate=sample_rate)


def _from_buffer(mv: memoryview, sample_rate: int) -> Prepared:
    """A buffer without numpy: format 'f' (float32) or 'h' (int16), C-contiguous, 1-D or [n, channels]."""
    if mv.ndim not in (1, 2) or not mv.c_contiguous:
        raise ValueError("samples: a C-contiguous buffer of shape [n] or [n, channels]")
    fmt = mv.format.lstrip("@=<")
    channels = 1 if mv.ndim == 1 else mv.shape[1]
    flat = mv.cast("B").cast(fmt) if mv.ndim == 2 else mv
    if fmt == "f":
        values = array.array("f", flat.tobytes())
    elif fmt == "h":
        values = array.array("f", (x / 32768.0 for x in flat.tolist()))
    else:
        raise ValueError(f"samples: buffer format '{mv.format}': float32 ('f') or int16 ('h')")
    n = len(values)
    if channels < 1 or n % channels:
        raise ValueError("samples: no channels")
    buf = (ctypes.c_float * n).from_buffer(values) if n else (ctypes.c_float * 1)()
    ptr = ctypes.cast(buf, ctypes.POINTER(ctypes.c_float))
    return Prepared(samples=(buf, values), pointer=ptr, n_frames=n // channels, channels=channels,
                    sample_rate=sample_rate)


def mono_float32(samples: Any) -> Any:
    """Samples for a stream: mono float32 (channels averaged, int16 scaled), as (keep-alive, pointer, n)."""
    p = _samples(samples, 16000)
    if p.channels == 1:
        return p.samples, p.pointer, p.n_frames
    np = _numpy()
    if np is not None and not isinstance(p.samples, tuple):
        m = np.ascontiguousarray(p.samples.mean(axis=1, dtype=np.float32))
        return m, m.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), m.shape[0]
    vals, c = p.samples[1], p.channels
    mono = (ctypes.c_float * p.n_frames)(*[sum(vals[i * c:(i + 1) * c]) / c for i in range(p.n_frames)])
    return mono, ctypes.cast(mono, ctypes.POINTER(ctypes.c_float)), p.n_frames
