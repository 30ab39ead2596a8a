"""Transcript, Token, Word, Segment and the CLI's output formats (JSON, SRT, WebVTT), byte for byte.

The formatters reproduce tools/cli/output.c exactly, working on the library's UTF-8 bytes.
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

    def to_srt(self) -> str:
        """SubRip subtitles of the segments, as `vkasr transcribe --format srt` writes them."""
        return _subtitles(self, False).decode("utf-8")

    def to_vtt(self) -> str:
        """WebVTT subtitles of the segments, as `vkasr transcribe --format vtt` writes them."""
        return _subtitles(self, True).decode("utf-8")

    def to_txt(self) -> str:
        """The text and a newline, as `vkasr transcribe` writes it."""
        return self.text + "\n"

    def write(self, path: str, format: Optional[str] = None) -> None:
        """Writes one format (txt, json, srt, vtt; default from the path's extension) to a file, in the
        CLI's bytes."""
        fmt = (format or path.rsplit(".", 1)[-1]).lower()
        data = {"txt": lambda: _raw(self.text, self._text_raw) + b"\n", "json": lambda: _format_json(self, None),
                "srt": lambda: _subtitles(self, False), "vtt": lambda: _subtitles(self, True)}.get(fmt)
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


def _timestamp(sec: float, sep: bytes) -> bytes:
    ms = int(sec * 1000.0 + 0.5)  # C's (long long) conversion truncates toward zero, as int() does
    q = lambda a, b: int(a / b) if a < 0 else a // b  # noqa: E731 (C division)
    return b"%02d:%02d:%02d%s%03d" % (q(ms, 3600000), q(ms, 60000) % 60, q(ms, 1000) % 60, sep, ms % 1000)


def _cue_text(s: bytes, vtt: bool) -> bytes:
    """A cue's text on one line (output.c's cue_text)."""
    s = s.split(b"\0", 1)[0]
    out = bytearray()
    i = 0
    while i < len(s):
        n = _utf8_valid(s, i)
        if n == 0:
            out += b"\xef\xbf\xbd"
            i += 1
            continue
        c = s[i]
        if n > 1:
            out += s[i:i + n]
        elif c < 0x20 or c == 0x7F:
            out += b" "
        elif vtt and c == 0x26:
            out += b"&amp;"
        elif vtt and c == 0x3C:
            out += b"&lt;"
        elif vtt and c == 0x3E:
            out += b"&gt;"
        else:
            out.append(c)
        i += n
    return bytes(out)


def _subtitles(t: Transcript, vtt: bool) -> bytes:
    sep = b"." if vtt else b","
    o = bytearray(b"WEBVTT\n\n" if vtt else b"")
    for i, s in enumerate(t.segments):
        if not vtt:
            o += b"%d\n" % (i + 1)
        o += _timestamp(s.start, sep) + b" --> " + _timestamp(s.end, sep) + b"\n"
        o += _cue_text(_raw(s.text, s._text_raw), vtt) + b"\n\n"
    return bytes(o)
