#!/usr/bin/env python3
"""make_long_wav.py SECONDS OUT.wav [CLIP.wav ...] — speech of the given length (16 kHz mono 16-bit) made
by repeating the clips (default: tests/data/audio/parity/*.wav) with 0.3 s pauses; for benchmarks."""
import glob, sys, wave

secs, out = float(sys.argv[1]), sys.argv[2]
clips = sys.argv[3:] or sorted(glob.glob("tests/data/audio/parity/*.wav"))
frames = []
for c in clips:
    with wave.open(c) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2, c
        frames.append(w.readframes(w.getnframes()))
gap = b"\0\0" * 4800
need = int(secs * 16000) * 2
buf = bytearray()
i = 0
while len(buf) < need:
    buf += frames[i % len(frames)] + gap
    i += 1
with wave.open(out, "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes(bytes(buf[:need]))
