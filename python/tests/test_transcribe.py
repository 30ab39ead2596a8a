"""Transcription through the package against the CLI on the same files: inputs, formats, batches,
errors, threads."""
import array
import threading
import time

import pytest

import vkasr
from conftest import AUDIO, MODEL, ROOT, SPEECH, STEREO, run_cli


@pytest.fixture(scope="module")
def cli_files(cli, tmp_path_factory):
    """The CLI's json, srt and vtt files for SPEECH and STEREO, named by the same path strings."""
    out = {}
    d = tmp_path_factory.mktemp("cli")
    for path in (SPEECH, STEREO):
        base = d / path.stem
        run_cli(cli, "-ojson", "-osrt", "-ovtt", "-of", str(base), str(path))
        out[path] = {ext: (base.parent / f"{base.name}.{ext}").read_bytes() for ext in ("json", "srt", "vtt")}
    return out


@pytest.mark.parametrize("path", [SPEECH, STEREO], ids=["mono16k", "stereo44k"])
def test_formats_equal_cli_files(model, cli_files, path):
    t = model.transcribe(str(path))
    assert t.text and t.words and t.segments
    assert t.to_json().encode() == cli_files[path]["json"]
    assert t.to_srt().encode() == cli_files[path]["srt"]
    assert t.to_vtt().encode() == cli_files[path]["vtt"]


SAMPLE = ROOT / "samples" / "sample.wav"  # 16.6 s, 40 words, no punctuation


def _cues(srt):
    """(start, end, lines) of each SubRip cue."""
    def sec(t):
        h, m, s = t.replace(",", ".").split(":")
        return int(h) * 3600 + int(m) * 60 + float(s)
    out = []
    for block in srt.strip("\n").split("\n\n"):
        num, times, *lines = block.split("\n")
        a, b = times.split(" --> ")
        out.append((sec(a), sec(b), lines))
    return out


@pytest.fixture(scope="module")
def sample_transcript(model):
    """The README sample's transcript (16.6 s: seconds on lavapipe), shared by the subtitle tests."""
    return model.transcribe(SAMPLE)


@pytest.mark.parametrize("limits,flags", [
    ({}, []),
    ({"max_line_chars": 30, "max_lines": 1, "max_duration": 4.0, "min_duration": 0.5, "pause": 0.3},
     ["--max-line-chars", "30", "--max-lines", "1", "--max-cue-seconds", "4", "--min-cue-seconds", "0.5",
      "--cue-pause", "0.3"]),
], ids=["defaults", "limits"])
def test_sample_subtitles_equal_cli_and_keep_the_limits(model, cli, sample_transcript, tmp_path, limits, flags):
    """The sample's SRT and WebVTT: Python's (keyword limits) are the CLI's (options) byte for byte, and
    every cue keeps the limits: lines, characters per line, duration; words in order, none lost."""
    t = sample_transcript
    srt, vtt = t.to_srt(**limits), t.to_vtt(**limits)
    # one CLI run: the SRT on stdout, the WebVTT into BASE.vtt
    assert srt.encode() == run_cli(cli, "--format", "srt", "-ovtt", "-of", str(tmp_path / "s"), *flags, str(SAMPLE))
    assert vtt.encode() == (tmp_path / "s.vtt").read_bytes()
    cues = _cues(srt)
    chars, lines = limits.get("max_line_chars", 42), limits.get("max_lines", 2)
    assert len(cues) >= 3
    for start, end, text in cues:
        assert 1 <= len(text) <= lines and all(0 < len(x) <= chars for x in text), text
        assert 0 < end - start <= limits.get("max_duration", 7.0) + 1e-3, (start, end)
    assert " ".join(x for _, _, text in cues for x in text) == t.text
    assert all(a[1] <= b[0] for a, b in zip(cues, cues[1:]))


def test_path_bytes_and_samples_agree_with_cli(model, cli_files, speech_pcm, np):
    expected = cli_files[SPEECH]["json"]
    by_path = model.transcribe(SPEECH)  # os.PathLike
    by_bytes = model.transcribe(SPEECH.read_bytes())
    samples = np.frombuffer(speech_pcm, np.int16)
    by_int16 = model.transcribe(samples, sample_rate=16000)
    by_float = model.transcribe(samples.astype(np.float32) / 32768, sample_rate=16000)
    by_stereo = model.transcribe(np.stack([samples, samples], axis=1), sample_rate=16000)
    for t in (by_path, by_bytes, by_int16, by_float, by_stereo):
        assert t.to_json(file=str(SPEECH)).encode() == expected
    assert by_bytes.file == "" and by_path.file == str(SPEECH)
    assert by_path.text == "hello world this a test"


def test_buffers_without_numpy(model, speech_pcm, monkeypatch):
    import vkasr._audio
    expected = model.transcribe(SPEECH).to_json()
    monkeypatch.setattr(vkasr._audio, "_numpy", lambda: None)
    ints = array.array("h", speech_pcm)
    floats = array.array("f", (x / 32768 for x in ints))
    assert model.transcribe(ints, sample_rate=16000).to_json(file=str(SPEECH)) == expected
    assert model.transcribe(memoryview(floats), sample_rate=16000).to_json(file=str(SPEECH)) == expected


def test_batch_equals_one_by_one(model, speech_pcm, np):
    samples = np.frombuffer(speech_pcm, np.int16)
    inputs = [str(STEREO), samples[:12000], SPEECH.read_bytes(), str(AUDIO / "silence_1s.wav")]
    alone = [model.transcribe(a, sample_rate=None if isinstance(a, (str, bytes)) else 16000) for a in inputs]
    for batch in ("auto", 1):
        together = model.transcribe_batch(inputs, sample_rate=16000, batch=batch)
        assert [t.to_json() for t in together] == [t.to_json() for t in alone]
    assert model.transcribe_batch([]) == []


def test_bytes_are_decoded_from_memory(model, monkeypatch):
    """Bytes go to the library as bytes: no file is written, and errors name "audio bytes"."""
    import os
    import tempfile

    def no_files(*_args, **_kwargs):
        raise AssertionError("bytes input wrote a file")
    monkeypatch.setattr(os, "memfd_create", no_files, raising=False)
    monkeypatch.setattr(tempfile, "mkstemp", no_files)
    flac = model.transcribe(STEREO.read_bytes())
    assert flac.to_json() == model.transcribe(STEREO).to_json(file="")
    for bad, reason in ((b"RIFF not really a wave file", "cannot decode audio"), (b"", "empty input")):
        with pytest.raises(vkasr.AudioError) as e:
            model.transcribe(bad)
        assert e.value.message.startswith("audio bytes: ") and reason in e.value.message, e.value.message
    with pytest.raises(vkasr.AudioError) as e:
        model.transcribe_batch([SPEECH.read_bytes(), bytearray(b"not audio"), str(SPEECH)])
    assert e.value.index == 1 and e.value.message.startswith("audio bytes: ")
    assert [r.text for r in e.value.results[::2]] == ["hello world this a test"] * 2


def test_batch_with_a_bad_input(model):
    with pytest.raises(vkasr.AudioError) as e:
        model.transcribe_batch([str(SPEECH), str(AUDIO / "not_audio.wav")])
    assert e.value.index == 1 and "not_audio.wav" in e.value.message
    assert e.value.results[0].text == "hello world this a test"


def test_errors_from_real_failures(model, tmp_path):
    with pytest.raises(vkasr.FileError) as e:
        vkasr.Model(tmp_path / "missing.gguf")
    assert "missing.gguf" in str(e.value) and isinstance(e.value, OSError)
    for bad in ("gguf_truncated.gguf", "gguf_bad_magic.gguf", "missing_tensor"):
        with pytest.raises(vkasr.ModelError) as e:
            vkasr.Model(ROOT / "tests" / "data" / "malformed" / bad)
        assert e.value.status == -4 and e.value.message
    with pytest.raises(vkasr.AudioError) as e:
        model.transcribe(AUDIO / "not_audio.wav")
    assert "not_audio.wav" in str(e.value)
    with pytest.raises(vkasr.AudioError):
        model.transcribe(b"RIFF not really a wave file")
    with pytest.raises(vkasr.FileError):
        model.transcribe(tmp_path / "missing.wav")
    with pytest.raises(vkasr.DeviceError) as e:
        vkasr.Model(MODEL, device="no-such-gpu")
    assert "no-such-gpu" in str(e.value)
    with pytest.raises(vkasr.UnsupportedError):
        vkasr.Model(MODEL, device="cuda")
    with pytest.raises(ValueError):
        model.transcribe(SPEECH, attention="sideways")
    with pytest.raises(ValueError):
        model.transcribe(array.array("f", [0.0] * 100))  # samples need sample_rate
    with pytest.raises(vkasr.InvalidArgumentError):
        model.transcribe(array.array("f", [0.0] * 100), sample_rate=999)
    # the model still works after all of these
    assert model.transcribe(SPEECH).text == "hello world this a test"


def test_closed_model_and_default_model(tmp_path):
    m = vkasr.Model()  # the default model (the source tree's, or $VKASR_MODEL)
    assert m.info.head == "tdt" and m.info.vocab_size > 0
    # on a CPU exactly where the device listing says the model's device is one
    listed = [d for d in vkasr.devices() if d.name == m.info.device]
    assert listed and m.info.on_cpu == (listed[0].type == "cpu")
    m.close()
    m.close()
    with pytest.raises(vkasr.InvalidArgumentError):
        m.transcribe(SPEECH)


def test_devices_and_versions():
    devs = vkasr.devices()
    assert devs and any(d.usable for d in devs)
    assert all(d.spec.startswith(("vulkan:", "cuda:")) for d in devs)
    assert vkasr.__version__ == vkasr.library_version()


def test_attention_and_progress(model):
    seen = []
    t = model.transcribe(SPEECH, attention="local:4", progress=seen.append)
    assert (t.attention, t.attention_window) == ("local", 4)
    assert seen and seen[-1].fraction == pytest.approx(1.0) and seen[-1].audio_seconds_total > 1.7
    assert model.transcribe(SPEECH, attention="full").attention == "full"

    def bad(p):
        raise RuntimeError("stop here")
    with pytest.raises(RuntimeError, match="stop here"):
        model.transcribe(SPEECH, progress=bad)


def test_abort_event_gives_partial_transcript(model):
    ev = threading.Event()
    ev.set()
    with pytest.raises(vkasr.Aborted) as e:
        model.transcribe(SPEECH, abort=ev)
    assert e.value.transcript.partial
    assert model.transcribe(SPEECH).text == "hello world this a test"


def test_gil_released_during_transcription(model, np, speech_pcm):
    """A pure-Python counter on the main thread advances while another thread is inside the C call."""
    samples = np.tile(np.frombuffer(speech_pcm, np.int16), 4)
    inside = threading.Event()
    done = threading.Event()

    def on_progress(p):
        inside.set()

    def work():
        model.transcribe(samples, sample_rate=16000, progress=on_progress)
        done.set()

    th = threading.Thread(target=work)
    th.start()
    assert inside.wait(30)
    n = 0
    t0 = time.monotonic()
    while not done.is_set():
        n += 1
    elapsed = time.monotonic() - t0
    th.join()
    # held GIL: the loop would only run at the callbacks; released: it runs all along
    assert elapsed > 0.05 and n > 20000 * elapsed, (n, elapsed)


def test_threads_share_one_model(model):
    expected = model.transcribe(STEREO).text
    results = [None] * 3

    def work(i):
        results[i] = model.transcribe(STEREO).text

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [expected] * 3


def test_decoder_choice(model):
    """decoder= picks the head: the shipped TDT model loads as "tdt" (and says so in its JSON) and
    refuses "ctc" with the C library's message naming the heads it has."""
    assert model.info.head == "tdt"
    assert '"head":"tdt"' in model.transcribe(str(SPEECH)).to_json()
    with vkasr.Model(str(MODEL), decoder="tdt") as m:
        assert m.info.head == "tdt"
    with pytest.raises(vkasr.ModelError) as e:
        vkasr.Model(str(MODEL), decoder="ctc")
    assert "ctc" in str(e.value).lower()
    with pytest.raises(ValueError):
        vkasr.Model(str(MODEL), decoder="beam")
