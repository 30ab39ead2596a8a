#!/bin/sh
# test_cli.sh — the vkasr CLI: exit codes, output formats, file outputs, --dump, stdin, convert,
# devices, several inputs with a bad one. usage: test_cli.sh VKASR CHECKER DATA_DIR WORK_DIR
set -u
VKASR=$1 CHECK=$2 DATA=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
M=$DATA/tiny/tdt
WAV=$DATA/audio/speech_16k_mono.wav
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect CODE CMD...: runs CMD (stdout to $WORK/out, stderr to $WORK/err), checks the exit code
expect() {
    want=$1; shift
    "$@" >"$WORK/out" 2>"$WORK/err"; got=$?
    [ "$got" -eq "$want" ] || { fail "exit $got (want $want): $*"; sed 's/^/  stderr: /' "$WORK/err" | head -5; }
}

expect 0 "$VKASR" --help;                 grep -q "usage: vkasr" "$WORK/out" || fail "--help text on stdout"
expect 0 "$VKASR" transcribe --help;      grep -q -- "--format" "$WORK/out" || fail "transcribe --help lists --format"
expect 0 "$VKASR" convert --help
expect 0 "$VKASR" --version;              grep -q "^vkasr [0-9]" "$WORK/out" || fail "--version"
expect 2 "$VKASR"
expect 2 "$VKASR" frobnicate
expect 2 "$VKASR" transcribe -m "$M"
expect 2 "$VKASR" transcribe -m "$M" --bogus "$WAV"
expect 2 "$VKASR" transcribe -m "$M" --format xml "$WAV"
expect 2 "$VKASR" transcribe -m "$M" -of base "$WAV" "$WAV"
expect 3 "$VKASR" transcribe -m "$DATA/no/such/model" "$WAV"
grep -q "no/such/model" "$WORK/err" || fail "model error names the path"
expect 3 "$VKASR" transcribe -m "$DATA/malformed/st_truncated" "$WAV"
expect 4 "$VKASR" transcribe -m "$M" "$WORK/missing.wav"
grep -q "missing.wav" "$WORK/err" || fail "audio error names the file"
expect 4 "$VKASR" transcribe -m "$M" "$DATA/audio/not_audio.wav"
expect 5 "$VKASR" transcribe -m "$M" -d 99 "$WAV"

# txt to stdout, same text from stdin ("-") and from a converted GGUF
expect 0 "$VKASR" transcribe -np -m "$M" "$WAV";    cp "$WORK/out" "$WORK/a.txt"
[ -s "$WORK/a.txt" ] || fail "empty transcript"
[ ! -s "$WORK/err" ] || fail "-np printed on stderr"
expect 0 sh -c "cat '$WAV' | '$VKASR' transcribe -np -m '$M' -"
cmp -s "$WORK/out" "$WORK/a.txt" || fail "stdin transcript differs"
expect 0 "$VKASR" convert "$M" -o "$WORK/m.gguf" --type f32
expect 0 "$VKASR" transcribe -np -m "$WORK/m.gguf" "$WAV"
cmp -s "$WORK/out" "$WORK/a.txt" || fail "GGUF transcript differs from the HF directory's"
expect 4 "$VKASR" convert "$M" -o "$WORK/no/such/dir/m.gguf"

# json / srt / vtt on stdout
expect 0 "$VKASR" transcribe -np -m "$M" --format json "$WAV"
"$CHECK" json "$WORK/out" || fail "json output"
expect 0 "$VKASR" transcribe -np -m "$M" --format srt "$WAV"
grep -Eq '^[0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3} --> [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}$' "$WORK/out" || fail "srt timing line"
head -1 "$WORK/out" | grep -q '^1$' || fail "srt numbering"
expect 0 "$VKASR" transcribe -np -m "$M" --format vtt "$WAV"
head -1 "$WORK/out" | grep -q '^WEBVTT' || fail "vtt header"
grep -Eq '^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} --> ' "$WORK/out" || fail "vtt timing line"

# whisper-cli style file outputs
expect 0 "$VKASR" transcribe -np -m "$M" -otxt -ojson -osrt -ovtt -of "$WORK/base" "$WAV"
for e in txt json srt vtt; do [ -s "$WORK/base.$e" ] || fail "-o$e did not write base.$e"; done
"$CHECK" json "$WORK/base.json" || fail "base.json"
cmp -s "$WORK/base.txt" "$WORK/a.txt" || fail "base.txt differs from stdout text"
cp "$WAV" "$WORK/in.wav"
expect 0 "$VKASR" transcribe -np -m "$M" -osrt "$WORK/in.wav"
[ -s "$WORK/in.wav.srt" ] || fail "-osrt without -of writes <input>.srt"

# --dump
expect 0 "$VKASR" transcribe -np -m "$M" --dump "$WORK/dump" "$WAV"
"$CHECK" npy "$WORK/dump/mel.npy" 16 || fail "mel.npy"
"$CHECK" npy "$WORK/dump/encoder.npy" 16 || fail "encoder.npy"

# several inputs, one bad: both good ones transcribed, exit non-zero at the end
expect 4 "$VKASR" transcribe -np -m "$M" "$WAV" "$WORK/missing.wav" "$WAV"
[ "$(wc -l <"$WORK/out")" -eq 2 ] || fail "two transcripts expected past a bad input"

# devices
expect 0 "$VKASR" devices
grep -q "usable      yes" "$WORK/out" || fail "devices lists a usable device"

echo "test_cli: $fails failure(s)"
[ "$fails" -eq 0 ]
