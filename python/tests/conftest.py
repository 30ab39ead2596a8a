"""Shared fixtures of the Python tests: the model, the sample audio, the CLI and strict mode.

Under CTest (VKASR_TEST_STRICT=1) nothing is skipped: numpy, the CLI (VKASR_CLI) and a C compiler
(VKASR_CC) must be there. Run by hand: VKASR_LIBRARY=build/src/libvkasr.so python3 -m pytest python/tests
"""
import os
import subprocess
import wave
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AUDIO = ROOT / "tests" / "data" / "audio"
SPEECH = AUDIO / "speech_16k_mono.wav"  # 1.7 s: "hello world this a test"
STEREO = AUDIO / "speech_44k_stereo.flac"
MODEL = Path(os.environ.get("VKASR_TEST_MODEL", ROOT / "models" / "vkasr-tdt-tiny-en.gguf"))
STRICT = os.environ.get("VKASR_TEST_STRICT") == "1"


def need(value, what):
    """value, else a skip (a failure under CTest, where everything must be there)."""
    if not value:
        if STRICT:
            pytest.fail(f"{what} is required under CTest (VKASR_TEST_STRICT=1)")
        pytest.skip(f"{what} not available")
    return value


@pytest.fixture(scope="session")
def np():
    try:
        import numpy
    except ImportError:
        numpy = None
    return need(numpy, "numpy (Debian: python3-numpy)")


@pytest.fixture(scope="session")
def model():
    import vkasr
    with vkasr.Model(MODEL) as m:
        yield m


@pytest.fixture(scope="session")
def speech_pcm():
    """SPEECH as int16 bytes (mono, 16 kHz)."""
    with wave.open(str(SPEECH)) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        return w.readframes(w.getnframes())


@pytest.fixture(scope="session")
def cli():
    return need(os.environ.get("VKASR_CLI"), "the vkasr CLI (VKASR_CLI)")


def run_cli(cli, *args, cwd=None):
    """Runs `vkasr transcribe` on the test model; its stderr goes to the test's (validation reports are
    seen there)."""
    p = subprocess.run([cli, "transcribe", "-np", "-m", str(MODEL), *args], stdout=subprocess.PIPE, cwd=cwd,
                       check=True)
    return p.stdout
