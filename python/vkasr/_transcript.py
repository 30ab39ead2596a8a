"""Transcript, Token, Word, Segment and the CLI's output formats (JSON, SRT, WebVTT), byte for byte.

The JSON formatter reproduces tools/cli/output.c exactly, working on the library's UTF-8 bytes; SRT and
WebVTT come from the library's cue maker (vkasr_subtitles), as the CLI's and the server's do.
"""
from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple, Union


def _dec(b: Optional[bytes]) -> str:
    return (b or b"").decode("utf-8", "replace")


def _raw(text: str, raw: Optional[bytes]) -> bytes:
    return raw if raw is not None else text.encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Token:
    """One vocabulary piece: its id, SentencePiece piece, decoded text, encoder frame (80 ms), TDT
    duration in frames (1 for other heads) and times in seconds."""

    id: int
    piece: str
    text: str
    frame: int
    duration: int
    start: float
    end: float
    _piece_raw: Optional[bytes] = field(default=None, repr=False, compare=False)
    _text_raw: Optional[bytes] = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Word:
    """A word with its times in seconds; tokens[first_token : first_token + n_tokens] of its transcript
    (or of its stream update) made it."""

    text: str
    start: float
    end: float
    first_token: int = 0
    n_tokens: int = 0
    _text_raw: Optional[bytes] = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Segment:
    """A caption line: a sentence, or speech up to a pause; its words and times in seconds.
    end_of_utterance / backchannel: an end-of-utterance model ended it with <EOU> / <EOB>."""

    text: str
    start: float
    end: float
    words: Tuple[Word, ...] = field(default=(), repr=False)
    _text_raw: Optional[bytes] = field(default=None, repr=False, compare=False)
    end_of_utterance: bool = False
    backchannel: bool = False


@dataclass(frozen=True)
class Event:
    """A token that is an event, not text: kind "end_of_utterance" (<EOU>), "backchannel" (<EOB>) or
    "language" (a language-prompt model's tag; text is the language, "de-DE"); the encoder frame and
    seconds where it was emitted; segment: how many segments end before it."""

    kind: str
    text: str
    frame: int
    time: float
    segment: int


@dataclass(frozen=True)
class Timings:
    """Where the call's time went (milliseconds) and the device memory it held (bytes)."""

    audio_seconds: float
    load_ms: float
    features_ms: float
    encoder_ms: float
    decoder_ms: float
    total_ms: float
    peak_device_bytes: int
    planned_device_bytes: int


@dataclass(frozen=True)
class Transcript:
    """The result of one transcription.

    text: the whole text; duration: input seconds; partial: stopped early (only what was decoded);
    attention: "full" or "local" (attention_window frames on each side for local); file: the input's path
    when it was one (what to_json() writes as "file"), else ""; head: the model's head ("tdt", "rnnt" or
    "ctc"); language: the language a language-prompt model detected (its first <xx-XX> tag), else None;
    events: the event tokens (Event), kept out of the text, words and segments.
    """

    text: str
    duration: float
    tokens: Tuple[Token, ...]
    words: Tuple[Word, ...]
    segments: Tuple[Segment, ...]
    attention: Optional[str] = None
    attention_window: int = 0
    partial: bool = False
    file: str = ""
    head: Optional[str] = None
    timings: Optional[Timings] = field(default=None, compare=False)
    _text_raw: Optional[bytes] = field(default=None, repr=False, compare=False)
    _file_raw: Optional[bytes] = field(default=None, repr=False, compare=False)
    language: Optional[str] = None
    events: Tuple[Event, ...] = ()

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> Dict[str, Any]:
        """The JSON object of to_json() as Python values."""
        return _json.loads(self.to_json())

    def to_json(self, file: Union[str, bytes, None] = None) -> str:
        """One line of JSON, as `vkasr transcribe --format json` (and -ojson) writes it, newline included.
        file: the "file" field (default: the input path, "" when the input was not a path)."""
        return _format_json(self, file).decode("utf-8")

    def to_srt(self, **limits: Any) -> str:
        """SubRip subtitles of the words, as `vkasr transcribe --format srt` writes them. limits (keywords,
        the C library's vkasr_subtitle_params): max_line_chars (42), max_lines (1 or 2, default 2),
        max_duration (7 s), min_duration (1 s), pause (0.5 s); a bad value raises InvalidArgumentError."""
        return _subtitles(self, False, limits).decode("utf-8")

    def to_vtt(self, **limits: Any) -> str:
        """WebVTT subtitles of the words, as `vkasr transcribe --format vtt` writes them; limits as to_srt()."""
        return _subtitles(self, True, limits).decode("utf-8")

    def to_txt(self) -> str:
        """The text and a newline, as `vkasr transcribe` writes it."""
        return self.text + "\n"

    def write(self, path: str, format: Optional[str] = None, **limits: Any) -> None:
        """Writes one format (txt, json, srt, vtt; default from the path's extension) to a file, in the
        CLI's bytes; limits: the subtitle limits of to_srt()."""
        fmt = (format or path.rsplit(".", 1)[-1]).lower()
        data = {"txt": lambda: _raw(self.text, self._text_raw) + b"\n", "json": lambda: _format_json(self, None),
                "srt": lambda: _subtitles(self, False, limits),
                "vtt": lambda: _subtitles(self, True, limits)}.get(fmt)
        if data is None:
            raise ValueError(f"{path}: unknown format '{fmt}' (txt, json, srt, vtt)")
        with open(path, "wb") as f:
            f.write(data())


def _utf8_valid(s: bytes, i: int) -> int:
    """Length of the well-formed UTF-8 sequence at s[i] (1..4), or 0 (output.c's utf8_valid)."""
    b0 = s[i]
    if b0 < 0x80:
        return 1
    if 0xC2 <= b0 <= 0xDF:
        n, cp = 2, b0 & 0x1F
    elif 0xE0 <= b0 <= 0xEF:
        n, cp = 3, b0 & 0x0F
    elif 0xF0 <= b0 <= 0xF4:
        n, cp = 4, b0 & 0x07
    else:
        return 0
    for k in range(1, n):
        if i + k >= len(s) or (s[i + k] & 0xC0) != 0x80:
            return 0
        cp = cp << 6 | (s[i + k] & 0x3F)
    if (n == 3 and cp < 0x800) or (n == 4 and (cp < 0x10000 or cp > 0x10FFFF)) or 0xD800 <= cp <= 0xDFFF:
        return 0
    return n


_JSON_ESC = {0x22: b'\\"', 0x5C: b"\\\\", 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t"}


def _json_str(s: bytes) -> bytes:
    """A JSON string of the bytes up to the first NUL (output.c's json_str)."""
    s = s.split(b"\0", 1)[0]
    out = bytearray(b'"')
    i = 0
    while i < len(s):
        n = _utf8_valid(s, i)
        if n == 0:
            out += b"\\ufffd"
            i += 1
            continue
        if n > 1:
            out += s[i:i + n]
            i += n
            continue
        c = s[i]
        if c in _JSON_ESC:
            out += _JSON_ESC[c]
        elif c < 0x20 or c == 0x7F:
            out += b"\\u%04x" % c
        else:
            out.append(c)
        i += 1
    out += b'"'
    return bytes(out)


def _format_json(t: Transcript, file: Union[str, bytes, None]) -> bytes:
    if file is None:
        fname = _raw(t.file, t._file_raw)
    elif isinstance(file, bytes):
        fname = file
    else:
        fname = file.encode("utf-8", "surrogateescape")
    o = bytearray(b'{"file":' + _json_str(fname) + b',"text":' + _json_str(_raw(t.text, t._text_raw)))
    o += b',"duration":%.6f,"partial":%s' % (t.duration, b"true" if t.partial else b"false")
    if t.head:
        o += b',"head":"%s"' % t.head.encode()
    if t.attention == "local":
        o += b',"attention":{"mode":"local","window":%d}' % t.attention_window
    elif t.attention == "full":
        o += b',"attention":{"mode":"full"}'
    if t.language is not None:
        o += b',"language":' + _json_str(t.language.encode("utf-8"))
    for i, e in enumerate(t.events):
        o += (b"," if i else b',"events":[') + b'{"kind":"%s","text":' % e.kind.encode() + _json_str(e.text.encode())
        o += b',"frame":%d,"time":%.3f,"segment":%d}' % (e.frame, e.time, e.segment)
        o += b"]" if i + 1 == len(t.events) else b""
    o += b',"tokens":['
    for i, k in enumerate(t.tokens):
        o += b'%s{"id":%d,"piece":' % (b"," if i else b"", k.id)
        o += _json_str(_raw(k.piece, k._piece_raw)) + b',"text":' + _json_str(_raw(k.text, k._text_raw))
        o += b',"frame":%d,"duration":%d,"start":%.3f,"end":%.3f}' % (k.frame, k.duration, k.start, k.end)
    o += b'],"words":['
    for i, w in enumerate(t.words):
        o += (b',{"text":' if i else b'{"text":') + _json_str(_raw(w.text, w._text_raw))
        o += b',"start":%.3f,"end":%.3f}' % (w.start, w.end)
    o += b'],"segments":['
    for i, s in enumerate(t.segments):
        o += (b',{"text":' if i else b'{"text":') + _json_str(_raw(s.text, s._text_raw))
        o += b',"start":%.3f,"end":%.3f}' % (s.start, s.end)
    o += b"]}\n"
    return bytes(o)


_LIMITS = ("max_line_chars", "max_lines", "max_duration", "min_duration", "pause")


def _subtitles(t: Transcript, vtt: bool, limits: Dict[str, Any]) -> bytes:
    """The words' cues from the C library (vkasr_subtitles): the CLI's and the server's bytes."""
    import ctypes

    from . import _lib
    from ._errors import error_for

    unknown = sorted(set(limits) - set(_LIMITS))
    if unknown:
        raise TypeError(f"unknown subtitle limit(s) {', '.join(unknown)} (known: {', '.join(_LIMITS)})")
    lib = _lib.lib()
    p = lib.vkasr_subtitle_params_default()
    for name, value in limits.items():
        if value is not None:
            setattr(p, name, value)
    words = (_lib.Word * max(len(t.words), 1))()
    for i, w in enumerate(t.words):
        words[i].text = _raw(w.text, w._text_raw).split(b"\0", 1)[0]
        words[i].start = w.start
        words[i].end = w.end
    out, n, err = ctypes.c_void_p(), ctypes.c_size_t(), _lib.Error()
    st = lib.vkasr_subtitles(words, len(t.words), ctypes.byref(p), 1 if vtt else 0, ctypes.byref(out),
                             ctypes.byref(n), ctypes.byref(err))
    if st != _lib.OK:
        raise error_for(st, err.message.decode("utf-8", "replace"))
    try:
        return ctypes.string_at(out.value, n.value) if n.value else b""
    finally:
        lib.vkasr_free(out)
