"""vkasr.Model: a loaded model, transcription of one input or many, and vkasr.devices()."""
from __future__ import annotations

import contextlib
import ctypes
import os
import re
import threading
import weakref
from ctypes import byref, c_int, c_size_t, c_void_p
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Union

from . import _lib
from ._audio import AudioInput, Prepared, prepare
from ._errors import Aborted, Error, InvalidArgumentError, ModelError, error_for
from ._run import AbortFlag, run
from ._transcript import Event, Segment, Timings, Token, Transcript, Word

_PRECISIONS = {"auto": _lib.PRECISION_AUTO, "f32": _lib.PRECISION_F32, "f16": _lib.PRECISION_F16}
_HEADS = ("tdt", "rnnt", "ctc")
_DECODERS = {"auto": _lib.DECODER_AUTO, "tdt": _lib.DECODER_TDT, "rnnt": _lib.DECODER_RNNT, "ctc": _lib.DECODER_CTC}


@dataclass(frozen=True)
class Progress:
    """What a progress callback receives: fraction 0..1 over the call, audio seconds done and in all,
    and the stage ("features", "encoder", "decoder")."""

    fraction: float
    audio_seconds_done: float
    audio_seconds_total: float
    stage: str


@dataclass(frozen=True)
class ModelInfo:
    """A loaded model: its head ("tdt", "rnnt" or "ctc"), sizes, precision in use ("f32" or "f16"),
    device name, the device memory its weights hold, and whether that device is the host's CPU (the
    reference backend or a CPU Vulkan driver such as lavapipe)."""

    head: str
    d_model: int
    n_layers: int
    vocab_size: int
    n_params: int
    precision: str
    device: str
    weight_bytes: int
    on_cpu: bool


@dataclass(frozen=True)
class Device:
    """A device the library can see. `spec` is what Model(device=...) takes for it."""

    index: int
    name: str
    type: str
    backend: str
    driver: str
    usable: bool
    missing: str
    memory_bytes: int
    subgroup_size: int
    shader_float16: bool
    cooperative_matrix: bool
    compute_capability: int
    spec: str


def _s(b: Optional[bytes]) -> str:
    return (b or b"").decode("utf-8", "replace")


def library_version() -> str:
    """The version of the loaded C library, e.g. "0.1.0"."""
    return _s(_lib.lib().vkasr_version_string())


def devices() -> List[Device]:
    """Every Vulkan device (then CUDA device, in a build with that backend) the library sees; [] when
    there is none."""
    L = _lib.lib()
    count, err = c_size_t(), _lib.Error()
    st = L.vkasr_list_devices(None, 0, byref(count), byref(err))
    if st == -6:  # VKASR_ERR_NO_DEVICE
        return []
    if st != _lib.OK:
        raise error_for(st, _s(err.message))
    infos = (_lib.DeviceInfo * max(count.value, 1))()
    st = L.vkasr_list_devices(infos, count.value, byref(count), byref(err))
    if st != _lib.OK:
        raise error_for(st, _s(err.message))
    out = []
    for d in infos[:count.value]:
        backend = _s(d.backend)
        local = sum(d.heap_size[i] for i in range(min(d.heap_count, 16)) if d.heap_device_local[i])
        out.append(Device(index=d.index, name=_s(d.name), type=_s(d.type), backend=backend, driver=_s(d.driver),
                          usable=bool(d.usable), missing=_s(d.missing), memory_bytes=local,
                          subgroup_size=d.subgroup_size, shader_float16=bool(d.shader_float16),
                          cooperative_matrix=bool(d.cooperative_matrix_nv or d.cooperative_matrix_khr),
                          compute_capability=d.compute_capability, spec=f"{backend}:{d.index}"))
    return out


def default_model_path() -> Optional[str]:
    """The model used when none is named: $VKASR_MODEL, the library's installed default model, or one a
    wheel bundles next to this package; None when there is none."""
    buf = ctypes.create_string_buffer(4096)
    p = _lib.lib().vkasr_default_model_path(buf, len(buf))
    if p:
        return os.fsdecode(p)
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, "vkasr-tdt-tiny-en.gguf")
    return bundled if os.path.isfile(bundled) else None


def _parse_memory(v: Union[int, str, None]) -> int:
    """max_memory: bytes as an int, or a size as the CLI takes it ("3G", "800M", "1.5GiB"; K/M/G are
    KiB/MiB/GiB)."""
    if v is None:
        return 0
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 0:
            raise ValueError(f"max_memory {v}: bytes, not negative")
        return v
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)(i?B)?\s*", str(v), re.IGNORECASE)
    if not m:
        raise ValueError(f"max_memory {v!r}: bytes as an int, or a size such as '3G', '800M', '1.5GiB'")
    scale = 1024 ** ("KMGT".find(m.group(2).upper()) + 1) if m.group(2) else 1
    return int(float(m.group(1)) * scale)


def _parse_attention(v: Optional[str]) -> Tuple[int, int]:
    """attention: None or "auto", "full", "local" or "local:W" (W encoder frames of 80 ms each side)."""
    if v is None or v == "auto":
        return _lib.ATTENTION_AUTO, 0
    if v == "full":
        return _lib.ATTENTION_FULL, 0
    m = re.fullmatch(r"local(?::([0-9]+))?", str(v))
    if not m or (m.group(1) is not None and int(m.group(1)) < 1):
        raise ValueError(f"attention {v!r}: 'auto', 'full', 'local' or 'local:W' (W >= 1)")
    return _lib.ATTENTION_LOCAL, int(m.group(1) or 0)


def _dec(b: Optional[bytes]) -> str:
    return (b or b"").decode("utf-8", "replace")


def transcript_of(L: ctypes.CDLL, r: Any, file: bytes, head: Optional[str] = None) -> Transcript:
    """Copies a vkasr_result (valid only until its session's next call) into a Transcript."""
    n = c_size_t()
    tp = L.vkasr_result_tokens(r, byref(n))
    tokens = tuple(Token(t.id, _dec(t.piece), _dec(t.text), t.frame, t.duration, t.start, t.end,
                         t.piece or b"", t.text or b"") for t in tp[:n.value])
    wp = L.vkasr_result_words(r, byref(n))
    words = [Word(_dec(w.text), w.start, w.end, w.first_token, w.n_tokens, w.text or b"")
             for w in wp[:n.value]]
    ep = L.vkasr_result_events(r, byref(n))
    events = tuple(Event(_lib.EVENT_KINDS[e.kind], _dec(e.text), e.frame, e.time, e.n_segments) for e in ep[:n.value])
    ended = {(e.segment, e.kind) for e in events}  # the segment before an <EOU> / <EOB> ends with it
    sp = L.vkasr_result_segments(r, byref(n))
    segments = tuple(Segment(_dec(s.text), s.start, s.end, tuple(words[s.first_word:s.first_word + s.n_words]),
                             s.text or b"", (i + 1, "end_of_utterance") in ended, (i + 1, "backchannel") in ended)
                     for i, s in enumerate(sp[:n.value]))
    lang = L.vkasr_result_language(r)
    win = c_int()
    att = L.vkasr_result_attention(r, byref(win))
    text = L.vkasr_result_text(r) or b""
    tm = L.vkasr_result_timings(r)
    timings = Timings(tm.audio_seconds, tm.load_ms, tm.features_ms, tm.encoder_ms, tm.decoder_ms, tm.total_ms,
                      tm.peak_device_bytes, tm.planned_device_bytes)
    return Transcript(text=_dec(text), duration=L.vkasr_result_duration(r), tokens=tokens, words=tuple(words),
                      segments=segments,
                      attention={_lib.ATTENTION_FULL: "full", _lib.ATTENTION_LOCAL: "local"}.get(att),
                      attention_window=win.value, partial=bool(L.vkasr_result_partial(r)),
                      file=os.fsdecode(file), head=head, timings=timings, _text_raw=text, _file_raw=file,
                      language=_dec(lang) if lang else None, events=events)


class Model:
    """A Parakeet model loaded on one device.

    path: a vkasr GGUF file, a Hugging Face Parakeet directory, a NeMo .nemo checkpoint, or the name of a
    model that `vkasr pull` (or huggingface_hub) put in the Hugging Face cache: an alias such as
    "parakeet-tdt-0.6b-v3", "org/repo", "org/repo:FILE" or "org/repo:QUANT" (default:
    default_model_path()). Names load from the cache only, without network.
    device: None ($VKASR_DEVICE, else the best Vulkan GPU, else the CPU backend), "cpu" (the CPU
    backend; "cpu:N" for N threads), "ref" (the plain-C reference backend), "cuda[:N]", "vulkan" (the
    best Vulkan device, lavapipe included), "vulkan:N", an index, or a Vulkan device name substring.
    precision: None/"auto", "f32" or "f16". max_memory: device
    memory each call may use, weights included (bytes, or "3G", "800M"). decoder: which head to load,
    None/"auto" (the only head, or a NeMo hybrid's transducer), "tdt", "rnnt" or "ctc". lookahead_ms: for
    NVIDIA's cache-aware streaming models, the trained context whose lookahead ((right + 1) x 80 ms) the
    chunked attention mask uses; None: the model's first. stream_slots: for those models, how many live
    streams to plan the device caches for (they share two pools' batched steps); None: pools of 1, 4,
    16, ... as streams open.

    One model may be used by any number of threads at once: each call takes a session of its own (kept
    for reuse). Close it (or use `with`) to free the device memory; calls in progress must have ended.
    """

    def __init__(self, path: Union[str, "os.PathLike[str]", None] = None, *, device: Union[str, int, None] = None,
                 precision: Optional[str] = None, max_memory: Union[int, str, None] = None,
                 decoder: Optional[str] = None, lookahead_ms: Optional[int] = None,
                 stream_slots: Optional[int] = None) -> None:
        self._handle: Optional[c_void_p] = None
        L = _lib.lib()
        if path is None:
            path = default_model_path()
            if path is None:
                raise ModelError("no model given, $VKASR_MODEL is not set and no default model is installed",
                                 -4)
        mp = L.vkasr_model_params_default()
        if device is not None:
            mp.device = str(device).encode()
        if precision is not None:
            if precision not in _PRECISIONS:
                raise ValueError(f"precision {precision!r}: 'auto', 'f32' or 'f16'")
            mp.precision = _PRECISIONS[precision]
        if decoder is not None:
            if decoder not in _DECODERS:
                raise ValueError(f"decoder {decoder!r}: 'auto', 'tdt', 'rnnt' or 'ctc'")
            mp.decoder = _DECODERS[decoder]
        if lookahead_ms is not None:
            mp.lookahead_ms = int(lookahead_ms)
        if stream_slots is not None:
            mp.stream_slots = int(stream_slots)
        self._max_memory = _parse_memory(max_memory)
        self.path = os.fspath(path)
        handle, err = c_void_p(), _lib.Error()
        st = L.vkasr_model_load(os.fsencode(path), byref(mp), byref(handle), byref(err))
        if st != _lib.OK:
            raise error_for(st, _s(err.message))
        self._handle = handle
        self._lib = L
        self._lock = threading.Lock()
        self._idle: List[c_void_p] = []
        self._busy = 0
        self._streams: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._head: Optional[str] = self.info.head

    # -- lifetime --------------------------------------------------------------------------------------

    def close(self) -> None:
        """Frees the model's streams, sessions and device memory. Calls in progress on other threads must
        have returned (else InvalidArgumentError). A second close does nothing."""
        for s in list(getattr(self, "_streams", ())):
            s.close()
        with self._lock:
            if self._handle is None:
                return
            if self._busy:
                raise InvalidArgumentError(f"{self.path}: cannot close the model: {self._busy} call(s) in progress",
                                           -1)
            for s in self._idle:
                self._lib.vkasr_session_free(s)
            self._idle.clear()
            self._lib.vkasr_model_free(self._handle)
            self._handle = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._handle is not None and not self._busy:
                self.close()
        except Exception:
            pass

    @property
    def closed(self) -> bool:
        return self._handle is None

    @property
    def info(self) -> ModelInfo:
        """What the model is and where it runs."""
        mi = _lib.ModelInfo()
        with self._session() as (_session, ok):  # checks the model is open
            st = self._lib.vkasr_model_get_info(self._handle, byref(mi))
            on_cpu = bool(self._lib.vkasr_model_on_cpu(self._handle))
            ok[0] = True
        if st != _lib.OK:
            raise error_for(st, "vkasr_model_get_info failed")
        return ModelInfo(head=_HEADS[mi.head] if 0 <= mi.head < 3 else str(mi.head), d_model=mi.d_model,
                         n_layers=mi.n_layers, vocab_size=mi.vocab_size, n_params=mi.n_params,
                         precision="f16" if mi.precision == _lib.PRECISION_F16 else "f32",
                         device=_s(mi.device_name), weight_bytes=mi.weight_bytes, on_cpu=on_cpu)

    # -- sessions --------------------------------------------------------------------------------------

    def _acquire(self) -> c_void_p:
        """A session for one call (or one stream): an idle one, else a new one."""
        with self._lock:
            if self._handle is None:
                raise InvalidArgumentError(f"{self.path}: the model is closed", -1)
            s = self._idle.pop() if self._idle else None
            self._busy += 1
        if s is None:
            s, err = c_void_p(), _lib.Error()
            st = self._lib.vkasr_session_create(self._handle, byref(s), byref(err))
            if st != _lib.OK:
                with self._lock:
                    self._busy -= 1
                raise error_for(st, _s(err.message))
        return s

    def _release(self, s: c_void_p, reuse: bool = True) -> None:
        """Gives a session back: kept for the next call, or freed (reuse=False) after a call that did not
        end with VKASR_OK, as a session's next call after an aborted one was seen to fail."""
        with self._lock:
            self._busy -= 1
            if reuse:
                self._idle.append(s)
        if not reuse:
            self._lib.vkasr_session_free(s)

    @contextlib.contextmanager
    def _session(self) -> Iterator[Tuple[c_void_p, List[bool]]]:
        """A session for one call; the call sets ok[0] when it ended with VKASR_OK."""
        s = self._acquire()
        ok = [False]
        try:
            yield s, ok
        finally:
            self._release(s, ok[0])

    def _params(self, attention: Optional[str], progress: Optional[Callable[[Progress], Any]],
                flag: AbortFlag, language: Optional[str] = None) -> Tuple[Any, Any]:
        tp = self._lib.vkasr_transcribe_params_default()
        if language is not None:
            self.check_language(language)
            tp.language = language.encode("utf-8")
        tp.attention, tp.attention_window = _parse_attention(attention)
        tp.max_memory = self._max_memory
        tp.abort_callback = flag.callback
        cb = None
        if progress is not None:
            def on_progress(p: Any, _user: Any) -> None:
                if flag.error is not None:
                    return
                try:
                    v = p.contents
                    progress(Progress(v.fraction, v.audio_seconds_done, v.audio_seconds_total, _s(v.stage)))
                except BaseException as e:  # stops the call; raised in the caller's thread after it
                    flag.error = e
            cb = _lib.ProgressCallback(on_progress)
            tp.progress_callback = cb
        return tp, cb

    # -- transcription ---------------------------------------------------------------------------------

    @property
    def languages(self) -> Tuple[str, ...]:
        """A language-prompt model's languages (its map's names, "auto" among them); () for other models."""
        n = c_size_t()
        self._lib.vkasr_model_check_language(self._handle, None, byref(n), None)
        return tuple(_dec(self._lib.vkasr_model_language(self._handle, i)) for i in range(n.value))

    def check_language(self, language: str) -> None:
        """Raises InvalidArgumentError (listing the model's languages) unless the model takes `language`."""
        err = _lib.Error()
        st = self._lib.vkasr_model_check_language(self._handle, language.encode("utf-8"), None, byref(err))
        if st != _lib.OK:
            raise error_for(st, err.message.decode("utf-8", "replace"))

    def transcribe(self, audio: AudioInput, *, sample_rate: Optional[int] = None, attention: Optional[str] = None,
                   progress: Optional[Callable[[Progress], Any]] = None, abort: Any = None,
                   language: Optional[str] = None) -> Transcript:
        """Transcribes one input.

        audio: a path (str or os.PathLike) of any format libsndfile reads; bytes of such a file; or
        samples: a numpy array (float32, float64 or int16; shape [n] or [n, channels]) or any buffer of
        float32/int16 (array.array, memoryview), with sample_rate (Hz; resampled to 16 kHz, channels
        averaged). attention: None/"auto", "full", "local" or "local:W". progress: called with a
        Progress now and then, on the thread running the call. abort: an object with is_set() (a
        threading.Event) that stops the call when set: Aborted is raised, with the partial transcript.
        language: language-prompt models (Nemotron 3.5): "auto" (default) or one of self.languages; the
        detected language is Transcript.language.

        Runs without holding the GIL. Ctrl-C stops it promptly (KeyboardInterrupt); the model stays usable.
        """
        prep = prepare(audio, sample_rate)
        if prep.error is not None:
            raise prep.error
        try:
            flag = AbortFlag(abort)
            tp, _keep = self._params(attention, progress, flag, language)
            with self._session() as (s, ok):
                st, t, msg = run(lambda: self._one(s, prep, tp), flag)
                ok[0] = st == _lib.OK
        finally:
            prep.close()
        if flag.error is not None:
            raise flag.error
        if st == _lib.ABORTED:
            e = Aborted("the transcription was aborted", _lib.ABORTED)
            e.transcript = t
            raise e
        if st != _lib.OK:
            raise error_for(st, msg)
        return t

    def _one(self, s: c_void_p, prep: Prepared, tp: Any) -> Tuple[int, Optional[Transcript], str]:
        L, res = self._lib, c_void_p()
        if prep.path is not None:
            st = L.vkasr_transcribe_file(s, prep.path, byref(tp), byref(res))
        else:
            st = L.vkasr_transcribe_pcm(s, prep.pointer, prep.n_frames, prep.sample_rate, prep.channels, byref(tp),
                                        byref(res))
        if st not in (_lib.OK, _lib.ABORTED) or not res:
            return st, None, _s(L.vkasr_session_last_error(s))
        return st, transcript_of(L, res, prep.file, self._head), ""

    def transcribe_batch(self, audios: Sequence[AudioInput], *, batch: Union[str, int] = "auto",
                         sample_rate: Optional[int] = None, attention: Optional[str] = None,
                         progress: Optional[Callable[[Progress], Any]] = None, abort: Any = None,
                         language: Optional[str] = None) -> List[Transcript]:
        """Transcribes many inputs in packed batches on the device (vkasr_transcribe_batch): each comes out
        as transcribe() would give it, faster. Results in input order. batch: "auto" (as many per batch as
        device memory holds) or the most inputs per batch. sample_rate applies to the sample inputs.

        When some inputs fail, the others are still transcribed, then the first failure's exception is
        raised with `results` (a list of Transcript or the Error of each input) and `index`."""
        if batch == "auto":
            max_batch = 0
        elif isinstance(batch, int) and not isinstance(batch, bool) and batch >= 1:
            max_batch = batch
        else:
            raise ValueError(f"batch {batch!r}: 'auto' or an int >= 1")
        preps: List[Prepared] = []
        try:
            for a in audios:
                is_file = isinstance(a, (str, os.PathLike, bytes, bytearray))
                preps.append(prepare(a, None if is_file else sample_rate))
            if not preps:
                return []
            inputs = (_lib.BatchInput * len(preps))()
            for i, p in enumerate(preps):
                inputs[i].path = p.path
                if p.path is None:
                    inputs[i].samples, inputs[i].n_frames = p.pointer, p.n_frames
                    inputs[i].sample_rate, inputs[i].channels = p.sample_rate, p.channels
            bp = self._lib.vkasr_batch_params_default()
            bp.max_batch = max_batch
            flag = AbortFlag(abort)
            tp, _keep = self._params(attention, progress, flag, language)
            with self._session() as (s, ok):
                st, out, msg = run(lambda: self._batch(s, inputs, preps, tp, bp), flag)
                ok[0] = st == _lib.OK
        finally:
            for p in preps:
                p.close()
        if flag.error is not None:
            raise flag.error
        if out is None:
            raise error_for(st, msg)
        for i, r in enumerate(out):
            if isinstance(r, Error):
                r.results, r.index = out, i  # type: ignore[attr-defined]
                raise r
        if st == _lib.ABORTED:
            e = Aborted("the batch was aborted", _lib.ABORTED)
            e.results = out  # type: ignore[attr-defined]
            raise e
        return out  # type: ignore[return-value]

    def _batch(self, s: c_void_p, inputs: Any, preps: List[Prepared], tp: Any, bp: Any) -> Tuple[int, Any, str]:
        L, n = self._lib, len(preps)
        results = (c_void_p * n)()
        st = L.vkasr_transcribe_batch(s, inputs, n, byref(tp), byref(bp), results)
        if not results[0]:
            return st, None, _s(L.vkasr_session_last_error(s))
        out: List[Any] = []
        for i in range(n):
            r = results[i]
            rs = L.vkasr_result_status(r)
            if preps[i].error is not None:  # bytes that did not decode ran as an empty input
                out.append(preps[i].error)
            elif rs in (_lib.OK, _lib.ABORTED):
                out.append(transcript_of(L, r, preps[i].file, self._head))
            else:
                out.append(error_for(rs, _s(L.vkasr_result_error(r))))
        return st, out, ""

    def stream(self, *, sample_rate: int = 16000, hop: Optional[float] = None, left_context: Optional[float] = None,
               right_context: Optional[float] = None, catch_up: bool = True, language: Optional[str] = None) -> "Any":
        """A live stream on this model (see vkasr.Stream): push() audio as it arrives, get the finalised
        segments back. hop, left_context, right_context: the window in seconds (default 0.64, 2.56,
        0.32); catch_up=False transcribes every hop in turn (text that depends only on the audio);
        language: as transcribe()'s."""
        from ._stream import Stream
        st = Stream(self, sample_rate=sample_rate, hop=hop, left_context=left_context, right_context=right_context,
                    catch_up=catch_up, language=language)
        self._streams.add(st)
        return st
