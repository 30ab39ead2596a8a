"""vkasr.Stream: live transcription (vkasr_stream_*): audio pushed as it arrives, finalised segments back."""
from __future__ import annotations

import threading
from ctypes import byref, c_void_p
from typing import Any, List, Optional

from . import _lib
from ._audio import mono_float32
from ._errors import InvalidArgumentError, error_for
from ._run import AbortFlag, run
from ._transcript import Segment, Word


class Stream:
    """Live transcription on a model (Model.stream()). A cache-aware streaming model advances its
    streaming session a chunk at a time (each frame computed once, streams of one model batched
    together); any other model runs overlapping windows over the audio received so far. Either way the
    work happens on the stream's worker thread; words that will not change are final, and a segment (a
    caption line: a sentence, or speech up to a pause of 1 s) ends after them.

        with model.stream() as s:
            for chunk in chunks:            # samples: numpy / float32 / int16 buffers at sample_rate
                for seg in s.push(chunk):
                    print(seg.start, seg.end, seg.text)
            for seg in s.finish():          # the last words
                print(seg.start, seg.end, seg.text)

    push() returns at once (the work happens on the worker); `partial` is the tentative text after the
    final words. Leaving the `with` block (or close()) without finish() cancels what is left.
    """

    def __init__(self, model: Any, *, sample_rate: int, hop: Optional[float], left_context: Optional[float],
                 right_context: Optional[float], catch_up: bool, language: Optional[str] = None) -> None:
        self._handle: Optional[c_void_p] = None
        if not isinstance(sample_rate, int) or not 1000 <= sample_rate <= 1 << 24:
            raise ValueError(f"sample_rate {sample_rate!r}: an int from 1000 to 2^24 Hz")
        self._model, self._lib, self.sample_rate = model, model._lib, sample_rate
        self._lock = threading.Lock()
        self._ready: List[Segment] = []
        self._words: List[Word] = []
        self._texts: List[bytes] = []
        self._partial = ""
        self._finished = False
        self._finished_ok = False  # finish() returned VKASR_OK: the session may serve other calls
        sp = self._lib.vkasr_stream_params_default()
        for name, v in (("hop_seconds", hop), ("left_context_seconds", left_context),
                        ("right_context_seconds", right_context)):
            if v is not None:
                setattr(sp, name, float(v))
        sp.catch_up = bool(catch_up)
        self._language = language.encode("utf-8") if language is not None else None  # alive until created
        sp.language = self._language
        self._eou = self._eob = False
        self._callbacks = (_lib.StreamCallback(self._on_final), _lib.StreamCallback(self._on_partial))
        sp.final_callback, sp.partial_callback = self._callbacks
        self._session = model._acquire()
        handle, err = c_void_p(), _lib.Error()
        st = self._lib.vkasr_stream_create(self._session, byref(sp), byref(handle), byref(err))
        if st != _lib.OK:
            model._release(self._session)
            raise error_for(st, err.message.decode("utf-8", "replace"))
        self._handle = handle

    # Callbacks run on the stream's worker thread: they only copy what they need.
    def _on_final(self, u: Any, _user: Any) -> None:
        u = u.contents
        words = [Word(w.text.decode("utf-8", "replace") if w.text else "", w.start, w.end, w.first_token,
                      w.n_tokens, w.text or b"") for w in u.words[:u.n_words]]
        kinds = [u.events[i].kind for i in range(u.n_events)]
        with self._lock:
            if words:
                self._words += words
                self._texts.append(u.text or b"")
            self._eou |= 0 in kinds  # vkasr_event_kind: end of utterance, backchannel
            self._eob |= 1 in kinds
            if u.segment_end and self._words:
                raw = b" ".join(self._texts)
                self._ready.append(Segment(raw.decode("utf-8", "replace"), self._words[0].start,
                                           self._words[-1].end, tuple(self._words), raw, self._eou, self._eob))
                self._words, self._texts = [], []
                self._eou = self._eob = False

    def _on_partial(self, u: Any, _user: Any) -> None:
        text = (u.contents.text or b"").decode("utf-8", "replace")
        with self._lock:
            self._partial = text

    def _take(self) -> List[Segment]:
        with self._lock:
            out, self._ready = self._ready, []
        return out

    def _check(self, st: int) -> None:
        if st != _lib.OK:
            msg = (self._lib.vkasr_stream_last_error(self._handle) or b"").decode("utf-8", "replace")
            raise error_for(st, msg or self._lib.vkasr_status_string(st).decode())

    @property
    def partial(self) -> str:
        """The tentative text after everything final ("" when none); may change with the next window."""
        with self._lock:
            return self._partial

    def push(self, samples: Any) -> List[Segment]:
        """Appends samples at the stream's sample_rate (numpy array or float32/int16 buffer; [n] or
        [n, channels], averaged to mono) and returns the segments finalised since the last call."""
        if self._handle is None:
            raise InvalidArgumentError("the stream is closed", -1)
        keep, ptr, n = mono_float32(samples)
        self._check(self._lib.vkasr_stream_push(self._handle, ptr, n, self.sample_rate))
        del keep
        return self._take()

    def finish(self) -> List[Segment]:
        """End of input: transcribes what is left, waits for it, and returns the remaining segments (the
        last one ends here). Ctrl-C cancels it (KeyboardInterrupt)."""
        if self._handle is None:
            raise InvalidArgumentError("the stream is closed", -1)
        if not self._finished:
            h, L = self._handle, self._lib
            try:
                st = run(lambda: L.vkasr_stream_finish(h), AbortFlag(), lambda: L.vkasr_stream_cancel(h))
            finally:
                self._finished = True
            self._finished_ok = st == _lib.OK
            self._check(st)
        return self._take()

    def cancel(self) -> None:
        """Stops as soon as possible (any thread); audio not yet transcribed is dropped."""
        if self._handle is not None:
            self._lib.vkasr_stream_cancel(self._handle)

    @property
    def stats(self) -> dict:
        """audio_seconds pushed, final_seconds, windows, window_seconds, compute_seconds."""
        if self._handle is None:
            raise InvalidArgumentError("the stream is closed", -1)
        s = _lib.StreamStats()
        self._check(self._lib.vkasr_stream_get_stats(self._handle, byref(s)))
        return {name: getattr(s, name) for name, _ in _lib.StreamStats._fields_}

    def close(self) -> None:
        """Cancels what is left (unless finished), frees the stream and gives its session back."""
        if self._handle is not None:
            h, self._handle = self._handle, None
            self._lib.vkasr_stream_free(h)
            self._model._release(self._session, self._finished_ok)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
