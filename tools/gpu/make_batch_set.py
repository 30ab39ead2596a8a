#!/usr/bin/env python3
"""make_batch_set.py N OUT_DIR [SEED] — N synthetic inputs for the batch benchmark (tools/gpu/batch.sh): WAV
files of 2-20 s (16 kHz mono 16-bit) cut at random offsets from the parity clips repeated with 0.3 s pauses
(tools/gpu/make_long_wav.py's speech), and OUT_DIR/manifest.jsonl (NeMo style: audio_filepath relative to
the manifest, duration) plus warm.jsonl (its first 32 lines, for warming pipelines up). Lengths are drawn
like a read-speech corpus's utterances: log-normal around 8 s (LibriSpeech's test sets: median ~6-8 s,
most between 2 and 20 s), clipped to [2, 20] s; the same SEED (default 13) gives the same set."""
import glob, json, math, os, random, sys, wave

n, out = int(sys.argv[1]), sys.argv[2]
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 13)
os.makedirs(out, exist_ok=True)
speech = bytearray()
for c in sorted(glob.glob("tests/data/audio/parity/*.wav")):
    with wave.open(c) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2, c
        speech += w.readframes(w.getnframes()) + b"\0\0" * 4800
speech = bytes(speech) * 4  # a few copies: any cut of up to 20 s fits
total = 0.0
with open(os.path.join(out, "manifest.jsonl"), "w") as m:
    for i in range(n):
        secs = min(20.0, max(2.0, math.exp(rng.gauss(math.log(8.0), 0.5))))
        ns = int(secs * 16000)
        off = 2 * rng.randrange(0, len(speech) // 2 - ns)  # a byte offset on a sample
        name = f"in{i:05d}.wav"
        with wave.open(os.path.join(out, name), "wb") as w:
            w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
            w.writeframes(speech[off:off + 2 * ns])
        m.write(json.dumps({"audio_filepath": name, "duration": round(ns / 16000, 4)}) + "\n")
        total += ns / 16000
with open(os.path.join(out, "manifest.jsonl")) as m, open(os.path.join(out, "warm.jsonl"), "w") as w:
    for i, line in enumerate(m):
        if i < 32:
            w.write(line)
print(f"{n} inputs, {total:.1f} s of audio ({total / max(n, 1):.2f} s on average) in {out}")
