"""Language-prompt (Nemotron 3.5) and end-of-utterance models in f32 (their tokens are the reference's): the
language argument, the detected language, events and segment flags (tests/data/streaming, made by
make_streaming_fixtures.py)."""
import json

import pytest

import vkasr
from conftest import ROOT

S = ROOT / "tests" / "data" / "streaming"
CLIPS = ROOT / "tests" / "data" / "audio" / "parity"


def expected(d, clip):
    return json.loads((S / d / clip / "tokens.json").read_text())


def test_prompt_languages_and_detection():
    with vkasr.Model(S / "stream_prompt.nemo", precision="f32") as m:
        assert m.languages == ("en-US", "en", "de-DE", "de", "fr-FR", "auto")
        with pytest.raises(vkasr.InvalidArgumentError, match="the model's languages: en-US, en, de-DE"):
            m.check_language("xx-XX")
        with pytest.raises(vkasr.InvalidArgumentError, match="unknown language"):
            m.transcribe(CLIPS / "short_okay.wav", language="it")
        t = m.transcribe(CLIPS / "short_okay.wav")  # auto
        want = expected("expected_prompt_auto", "short_okay")
        assert [k.id for k in t.tokens] == want["ids"]
        assert t.text == want["text"] and t.language == want["language"] == "de-DE"
        assert [(e.kind, e.frame) for e in t.events] == [("language", f) for _, f in want["events"]]
        assert "<" not in t.text and all("<" not in w.text for w in t.words)
        t = m.transcribe(CLIPS / "short_okay.wav", language="de-DE")
        assert [k.id for k in t.tokens] == expected("expected_prompt_de", "short_okay")["ids"]
        assert t.language is None and t.events == ()
        json.loads(t.to_json())


def test_other_models_take_auto_only():
    with vkasr.Model(S / "stream_rnnt.nemo", precision="f32") as m:
        assert m.languages == ()
        m.check_language("auto")
        with pytest.raises(vkasr.InvalidArgumentError, match="no language prompt"):
            m.check_language("de")


def test_eou_events_end_segments():
    with vkasr.Model(S / "stream_eou.nemo", precision="f32") as m:
        t = m.transcribe(CLIPS / "us_fox.wav")
    want = expected("expected_eou", "us_fox")
    assert t.text == want["text"] and "<EO" not in t.text
    kinds = {0: "end_of_utterance", 1: "backchannel"}
    assert [(e.kind, e.frame) for e in t.events] == [(kinds[k], f) for k, f in want["events"]]
    for e in t.events:  # the segment before each event ends with it
        seg = t.segments[e.segment - 1]
        assert seg.end_of_utterance if e.kind == "end_of_utterance" else seg.backchannel
    d = t.to_dict()
    assert [e["kind"] for e in d["events"]] == [e.kind for e in t.events]
