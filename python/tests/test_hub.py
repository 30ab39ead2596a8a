"""Models by name: vkasr.Model("org/repo") and aliases load from the Hugging Face cache (no network), the
layout huggingface_hub writes; a name not there is refused naming the cache and `vkasr pull`."""
import hashlib
import os

import pytest

import vkasr
from conftest import MODEL, SPEECH

REPO = "nvidia/parakeet-tdt-0.6b-v3"
FILE = "parakeet-tdt-0.6b-v3.q8_0.gguf"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """A cache holding MODEL as REPO's FILE at COMMIT, refs/main naming it (the blob links to MODEL)."""
    sha = hashlib.sha256(MODEL.read_bytes()).hexdigest()
    d = tmp_path / ("models--" + REPO.replace("/", "--"))
    (d / "blobs").mkdir(parents=True)
    (d / "refs").mkdir()
    (d / "snapshots" / COMMIT).mkdir(parents=True)
    os.symlink(MODEL, d / "blobs" / sha)
    os.symlink(f"../../blobs/{sha}", d / "snapshots" / COMMIT / FILE)
    (d / "refs" / "main").write_text(COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv("VKASR_PULL_INDEX", raising=False)
    return tmp_path


def test_repo_name_loads_from_cache(cache, model):
    want = model.transcribe(SPEECH).text
    assert want
    # the built-in alias is pinned to NVIDIA's commit, which this cache lacks: refs/main's snapshot serves
    for name in (REPO, f"{REPO}:{FILE}", f"{REPO}:q8_0", "parakeet-tdt"):
        with vkasr.Model(name) as m:
            assert m.transcribe(SPEECH).text == want


def test_missing_name_names_cache_and_pull(cache):
    with pytest.raises(vkasr.FileError) as ei:
        vkasr.Model("nvidia/not-cached")
    msg = str(ei.value)
    assert "model 'nvidia/not-cached' is not in the Hugging Face cache" in msg
    assert str(cache) in msg and "run `vkasr pull nvidia/not-cached`" in msg
    with pytest.raises(vkasr.FileError) as ei:
        vkasr.Model("nemotron-en")
    assert "run `vkasr pull nemotron-en`" in str(ei.value)
