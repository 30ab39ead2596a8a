#!/bin/sh
# make_test_audio.sh — regenerates the audio fixtures in tests/data/audio/ used by tests/test_audio.c.
# Needs: espeak-ng, sox, python3 (standard library only), a C compiler and libsndfile's headers
# (libsndfile1-dev; sox cannot write MP3 or Opus here, so a tiny libsndfile encoder is compiled into a
# temporary folder). Samples are deterministic for a given tool set (sox runs without dither); the
# Ogg serial numbers and the AIFF timestamp change on every run.
# The expected frame counts in tests/test_audio.c must be updated if the fixtures change: this script
# prints them at the end.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/tests/data/audio"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir -p "$out"

# --- sfenc: re-encode a file with libsndfile (major format + subtype given by name) ---------------
cat >"$tmp/sfenc.c" <<'EOF'
#include <sndfile.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: sfenc IN OUT mp3|opus\n"); return 2; }
    SF_INFO in = {0}, oi = {0};
    SNDFILE *a = sf_open(argv[1], SFM_READ, &in);
    if (!a) { fprintf(stderr, "%s: %s\n", argv[1], sf_strerror(NULL)); return 1; }
    oi.samplerate = in.samplerate;
    oi.channels = in.channels;
    oi.format = strcmp(argv[3], "mp3") == 0 ? (SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III)
                                            : (SF_FORMAT_OGG | SF_FORMAT_OPUS);
    SNDFILE *b = sf_open(argv[2], SFM_WRITE, &oi);
    if (!b) { fprintf(stderr, "%s: %s\n", argv[2], sf_strerror(NULL)); return 1; }
    double level = 0.6; /* lower bitrate: the files only need to decode, not sound good */
    sf_command(b, SFC_SET_COMPRESSION_LEVEL, &level, sizeof level);
    float buf[4096];
    sf_count_t n;
    while ((n = sf_readf_float(a, buf, 4096 / in.channels)) > 0)
        if (sf_writef_float(b, buf, n) != n) { fprintf(stderr, "write: %s\n", sf_strerror(b)); return 1; }
    sf_close(a);
    sf_close(b);
    return 0;
}
EOF
cc -O1 -o "$tmp/sfenc" "$tmp/sfenc.c" $(pkg-config --cflags --libs sndfile)

# --- speech ---------------------------------------------------------------------------------------
espeak-ng -s 190 -w "$tmp/espeak.wav" "hello world, this is a test."
# 16 kHz mono 16-bit: the model's own format (bit-exact path).
sox -D "$tmp/espeak.wav" -r 16000 -c 1 -b 16 -e signed-integer "$out/speech_16k_mono.wav"
# 44.1 kHz stereo: left = speech, right = speech * 0.5, so the mono mean is 0.75 * speech and any
# "first channel only" or "sum" mix-down is detectable.
sox -D "$out/speech_16k_mono.wav" -r 44100 -b 16 "$tmp/s44.wav" rate -h 44100
sox -D "$tmp/s44.wav" "$out/speech_44k_stereo.wav" remix 1v1 1v0.5
sox -D "$out/speech_44k_stereo.wav" "$out/speech_44k_stereo.flac"
sox -D "$out/speech_44k_stereo.wav" -C 0 "$out/speech_44k_stereo.ogg"
"$tmp/sfenc" "$out/speech_44k_stereo.wav" "$out/speech_44k_stereo.mp3" mp3
"$tmp/sfenc" "$out/speech_16k_mono.wav" "$out/speech_16k_mono.opus" opus
sox -D "$out/speech_16k_mono.wav" "$out/speech_16k_mono.aiff"
# 8 kHz 32-bit float WAV.
sox -D "$out/speech_16k_mono.wav" -r 8000 -e floating-point -b 32 "$out/speech_8k_f32.wav" rate -h 8000

# --- edge cases -----------------------------------------------------------------------------------
sox -D -r 16000 -n -r 16000 -c 1 -b 16 "$out/silence_1s.wav" trim 0 1
# Full-scale square wave (sox clips the 2x overdrive: every sample is +-32767 or -32768).
sox -D -r 16000 -n -r 16000 -c 1 -b 16 "$out/clipped.wav" synth 0.5 square 250 vol 2 2>/dev/null
sox -D -r 16000 -n -r 16000 -c 1 -b 16 "$out/short_100.wav" synth 1 sine 440 trim 0 100s

# Empty WAV (valid header, 0 frames) and a float WAV with a NaN at frame 1234 (of 2000), written with
# the Python standard library (canonical 44-byte headers).
python3 - "$out" <<'EOF'
import math, struct, sys
out = sys.argv[1]
def wav(path, fmt_tag, bits, rate, data):
    block = bits // 8
    hdr = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE"
    hdr += b"fmt " + struct.pack("<IHHIIHH", 16, fmt_tag, 1, rate, rate * block, block, bits)
    hdr += b"data" + struct.pack("<I", len(data))
    open(path, "wb").write(hdr + data)
wav(out + "/empty.wav", 1, 16, 16000, b"")
x = [0.25 * math.sin(2 * math.pi * 440 * n / 16000) for n in range(2000)]
x[1234] = float("nan")
wav(out + "/nan_f32.wav", 3, 32, 16000, struct.pack("<%df" % len(x), *x))
EOF

# Truncated WAV: the header of the full speech file, data cut after 4000.5 samples (8001 bytes).
head -c $((44 + 8001)) "$out/speech_16k_mono.wav" >"$out/truncated.wav"
# Not audio at all.
printf 'This is a text file, not a WAV file.\n' >"$out/not_audio.wav"

# --- report ---------------------------------------------------------------------------------------
for f in "$out"/*; do
    [ -f "$f" ] || continue
    case "$f" in
    *.mp3 | *.opus | *not_audio* | *empty* | *nan_* | *truncated*) printf '%s\n' "$(basename "$f")" ;;
    *) printf '%s: %s Hz, %s ch, %s frames\n' "$(basename "$f")" "$(soxi -r "$f")" "$(soxi -c "$f")" \
        "$(soxi -s "$f")" ;;
    esac
done
du -ch "$out"/*.* | tail -1
