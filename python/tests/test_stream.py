"""Live streams: pushed audio comes back as final segments holding the sample's words."""
import pytest

import vkasr
from conftest import ROOT, SPEECH


def test_stream_finalises_the_words(model, speech_pcm, np):
    samples = np.frombuffer(speech_pcm, np.int16)
    offline = model.transcribe(SPEECH)
    segments = []
    with model.stream(catch_up=False) as s:
        for i in range(0, len(samples), 1600):  # 0.1 s at a time, as a microphone would
            segments += s.push(samples[i:i + 1600])
            assert isinstance(s.partial, str)
        segments += s.finish()
        assert s.stats["audio_seconds"] == pytest.approx(len(samples) / 16000, abs=1e-3)
        assert s.partial == ""
    words = [w for seg in segments for w in seg.words]
    assert close_to([w.text for w in words], offline)
    assert " ".join(seg.text for seg in segments) == " ".join(w.text for w in words)
    for seg in segments:
        assert seg.start == seg.words[0].start and seg.end == seg.words[-1].end
    for a, b in zip(words, offline.words):  # windows place a word within a frame of the offline run
        assert abs(a.start - b.start) <= 0.08 + 1e-9


def test_stream_resamples_and_mixes_channels(model, speech_pcm, np):
    samples = np.frombuffer(speech_pcm, np.int16).astype(np.float32) / 32768
    up = np.repeat(samples, 3)  # 48 kHz
    with model.stream(sample_rate=48000, catch_up=False) as s:
        s.push(np.stack([up, up], axis=1))
        text = " ".join(seg.text for seg in s.finish())
    assert close_to(text.split(), model.transcribe(SPEECH))


def test_stream_errors(model):
    s = model.stream()
    with pytest.raises(vkasr.AudioError):
        s.push(np_free_nan())
    s.close()
    with pytest.raises(vkasr.InvalidArgumentError):
        s.push(b"")
    with pytest.raises(vkasr.InvalidArgumentError):
        model.stream(hop=0.0)
    assert model.transcribe(SPEECH).text == "hello world this a test"  # sessions went back


def close_to(words, offline):
    """Every word of the offline transcript, in place; one may differ (a window hears less context than
    the whole file: the tiny model makes "hollow" of the first "hello")."""
    ref = [w.text for w in offline.words]
    return len(words) == len(ref) >= 5 and sum(a != b for a, b in zip(words, ref)) <= 1


def np_free_nan():
    import array
    return array.array("f", [0.0, float("nan")])


def test_cache_aware_streams_share_planned_pools(speech_pcm, np):
    """A cache-aware model with stream_slots: three streams at once (pools of 1 and 7 slots), each
    pushed in pieces, each giving the offline chunked run's text; a negative count is refused."""
    stream_model = ROOT / "models" / "vkasr-rnnt-stream-tiny-en.gguf"
    with pytest.raises(vkasr.InvalidArgumentError):
        vkasr.Model(stream_model, device="cpu:1", stream_slots=-1)
    with vkasr.Model(stream_model, device="cpu:1", stream_slots=8) as m:
        offline = m.transcribe(SPEECH).text
        samples = np.frombuffer(speech_pcm, np.int16)
        streams = [m.stream() for _ in range(3)]
        texts = [[] for _ in streams]
        for at in range(0, len(samples), 1600):
            for s, t in zip(streams, texts):
                t += [seg.text for seg in s.push(samples[at:at + 1600])]
        for s, t in zip(streams, texts):
            t += [seg.text for seg in s.finish()]
            s.close()
    assert offline and all(" ".join(t) == offline for t in texts), (offline, texts)


def test_stream_slots_beyond_the_device_fall_back(speech_pcm, np, monkeypatch):
    """Planned caches that do not fit the device (the CPU backend capped at 256 MiB: 99,999 slots would
    take gigabytes) fall back to the default pools: the second stream still opens and transcribes."""
    stream_model = ROOT / "models" / "vkasr-rnnt-stream-tiny-en.gguf"
    monkeypatch.setenv("VKASR_MAX_DEVICE_MEMORY_MIB", "256")
    with vkasr.Model(stream_model, device="cpu:1", stream_slots=100000) as m:
        offline = m.transcribe(SPEECH).text
        samples = np.frombuffer(speech_pcm, np.int16)
        streams = [m.stream() for _ in range(2)]
        texts = []
        for s in streams:
            s.push(samples)
            texts.append(" ".join(seg.text for seg in s.finish()))
            s.close()
    assert offline and texts == [offline, offline], (offline, texts)
