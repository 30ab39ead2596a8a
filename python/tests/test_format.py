"""The output formats on made-up transcripts: escapes, invalid UTF-8, times, as tools/cli/output.c
writes them (the device-backed tests compare real transcripts with the CLI's files)."""
import pytest

import vkasr
from vkasr import Segment, Token, Transcript, Word


def make(text_raw, seg_start=0.0, seg_end=1.0, attention="full", window=0):
    w = Word("w", 0.0, 0.5, 0, 1)
    return Transcript(text=text_raw.decode("utf-8", "replace"), duration=1.5, tokens=(
        Token(7, "\u2581w", "w", 0, 2, 0.0, 0.16),), words=(w,), segments=(
        Segment(text_raw.decode("utf-8", "replace"), seg_start, seg_end, (w,), text_raw),),
        attention=attention, attention_window=window, _text_raw=text_raw)


def test_json_escapes_and_invalid_utf8():
    t = make(b'a"b\\c\nd\te\x01\x7f \xc3\xa9 \xff\xe2\x82 \xed\xa0\x80 \xf0\x9f\x98\x80')
    assert t.to_json(file=b"dir/\xfff.wav") == (
        '{"file":"dir/\\ufffdf.wav","text":"a\\"b\\\\c\\nd\\te\\u0001\\u007f \u00e9 \\ufffd\\ufffd\\ufffd '
        '\\ufffd\\ufffd\\ufffd \U0001F600","duration":1.500000,"partial":false,"attention":{"mode":"full"},'
        '"tokens":[{"id":7,"piece":"\u2581w","text":"w","frame":0,"duration":2,"start":0.000,"end":0.160}],'
        '"words":[{"text":"w","start":0.000,"end":0.500}],'
        '"segments":[{"text":"a\\"b\\\\c\\nd\\te\\u0001\\u007f \u00e9 \\ufffd\\ufffd\\ufffd \\ufffd\\ufffd\\ufffd '
        '\U0001F600","start":0.000,"end":1.000}]}\n')


def test_json_local_attention_and_no_attention():
    assert '"attention":{"mode":"local","window":128}' in make(b"x", attention="local", window=128).to_json()
    assert '"attention"' not in make(b"x", attention=None).to_json()


def test_srt_and_vtt_cues():
    """The cues come from the words (the library's cue maker, as the CLI's): escapes, invalid UTF-8, times
    past an hour, a cue lasting at least 1 s."""
    ws = (Word("a<b>&c", 3725.0004, 3725.5), Word("d\ufffd", 3725.6, 3725.9996, _text_raw=b"d\xff"))
    t = Transcript(text="", duration=3726.0, tokens=(), words=ws, segments=())
    assert t.to_srt() == "1\n01:02:05,000 --> 01:02:06,000\na<b>&c d\ufffd\n\n"
    assert t.to_vtt() == "WEBVTT\n\n01:02:05.000 --> 01:02:06.000\na&lt;b&gt;&amp;c d\ufffd\n\n"
    # a pause of 0.1 s splits at pause=0.05: the first cue lasts until the second starts, the second 1 s
    assert t.to_srt(pause=0.05) == ("1\n01:02:05,000 --> 01:02:05,600\na<b>&c\n\n"
                                    "2\n01:02:05,600 --> 01:02:06,600\nd\ufffd\n\n")


def test_subtitle_limits_checked():
    t = Transcript(text="", duration=0.0, tokens=(), words=(Word("w", 0.0, 0.5),), segments=())
    with pytest.raises(vkasr.InvalidArgumentError, match="max_lines 3"):
        t.to_srt(max_lines=3)
    with pytest.raises(TypeError, match="max_chars"):
        t.to_vtt(max_chars=10)


def test_empty_transcript():
    t = Transcript(text="", duration=0.0, tokens=(), words=(), segments=())
    assert t.to_srt() == ""
    assert t.to_vtt() == "WEBVTT\n\n"
    assert t.to_json() == ('{"file":"","text":"","duration":0.000000,"partial":false,"tokens":[],"words":[],'
                           '"segments":[]}\n')


def test_exceptions_are_a_hierarchy():
    assert issubclass(vkasr.VulkanError, vkasr.DeviceError) and issubclass(vkasr.DeviceError, vkasr.Error)
    assert issubclass(vkasr.InvalidArgumentError, ValueError)
    assert vkasr.ModelError("m").status == -4
