#!/bin/sh
# test_cli.sh — the vkasr CLI: exit codes, output formats, file outputs, --dump, stdin, convert,
# devices, bench, several inputs with a bad one, write errors on stdout, --attention, --max-memory,
# -v, --max-symbols, --profile; batches (--batch, --manifest / --output-manifest with WER, --devices on
# one device twice, --sessions, --shard).
# usage: test_cli.sh VKASR CHECKER DATA_DIR WORK_DIR VKASR_BIN [PART]
#   VKASR runs the CLI with validation recorded (a wrapper script); VKASR_BIN is the executable itself,
#   for the tests that send it signals; PART 1, 2 or all (below).
set -u
VKASR=$1 CHECK=$2 DATA=$3 WORK=$4 VKASR_BIN=$5 PART=${6:-all}
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

# PART: 1 runs the checks up to --max-symbols, 2 those from there on (the shipped model: signals,
# bench, live, devices), all (the default) both; CTest runs the halves as two tests, side by side.
if [ "$PART" != 2 ]; then

expect 0 "$VKASR" --help;                 grep -q "usage: vkasr" "$WORK/out" || fail "--help text on stdout"
expect 0 "$VKASR" transcribe --help;      grep -q -- "--format" "$WORK/out" || fail "transcribe --help lists --format"
expect 0 "$VKASR" convert --help
expect 0 "$VKASR" --version;              grep -q "^vkasr [0-9]" "$WORK/out" || fail "--version"
# the option tables: each command's help lists the shared options it takes; an unknown option, a missing
# value and another command's option are usage errors
for cmd in transcribe live bench compare; do
    expect 0 "$VKASR" $cmd --help
    grep -q -- "-m, --model PATH" "$WORK/out" && grep -q -- "-p, --precision P" "$WORK/out" ||
        fail "$cmd --help lists -m and -p"
    expect 2 "$VKASR" $cmd --frobnicate
    expect 2 "$VKASR" $cmd -m
done
expect 2 "$VKASR" compare -d cpu x.wav     # compare takes --devices
expect 2 "$VKASR" bench -np                # -np is transcribe's and live's
expect 2 "$VKASR" transcribe --json x.wav  # --json is live's, bench's and compare's
expect 2 "$VKASR" devices -v
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
[ "$(grep -o "missing.wav" "$WORK/err" | wc -l)" -eq 1 ] || fail "audio error names the file more than once"
expect 4 "$VKASR" transcribe -m "$M" "$DATA/audio/not_audio.wav"
expect 5 "$VKASR" transcribe -m "$M" -d 99 "$WAV"
# the default device: without a Vulkan GPU (lavapipe is a CPU driver) the CPU backend, which
# `vkasr devices` lists; --device vulkan still takes lavapipe, and ref the reference backend
expect 0 "$VKASR" devices
grep -q "^device cpu: CPU, [0-9]* thread" "$WORK/out" || fail "devices: no CPU backend entry"
grep -q "^  blas  *.*OpenBLAS" "$WORK/out" || fail "devices: the CPU backend's BLAS is not named"
if ! grep -Eq "type +(discrete|integrated|virtual)" "$WORK/out"; then
    expect 0 env VKASR_DEVICE= "$VKASR" transcribe -v -m "$M" "$WAV"
    grep -q " on CPU, [0-9]* thread" "$WORK/err" || fail "no GPU: the default device is not the CPU backend"
    expect 0 env VKASR_DEVICE= "$VKASR" transcribe -v --threads 1 -m "$M" "$WAV"
    grep -q " on CPU, 1 thread:" "$WORK/err" || fail "--threads 1: not one thread"
    expect 0 env VKASR_DEVICE= "$VKASR" transcribe -v -d vulkan -m "$M" "$WAV"
    grep -qi " on llvmpipe" "$WORK/err" || fail "-d vulkan: not lavapipe"
    for phase in "Vulkan instance [0-9.]+ ms" "device selection [0-9.]+ ms \(1 device" "device creation [0-9.]+ ms" \
        "pipeline layout and cache [0-9.]+ ms" "weights [0-9.]+ MiB copied to the device in [0-9.]+ ms \([0-9]+ MB/s" \
        "[0-9]+ pipelines created \([0-9]+ found in the pipeline cache\)"; do
        grep -Eq "start-up: $phase" "$WORK/err" || fail "-d vulkan -v: no start-up line '$phase'"
    done
    grep -Eq "shut-down: device idle [0-9.]+ ms, weights freed [0-9.]+, pipelines and their cache [0-9.]+, device \
destroyed [0-9.]+, instance [0-9.]+$" "$WORK/err" || fail "-d vulkan -v: no shut-down split"
    # the staged upload of a discrete GPU (VKASR_FORCE_STAGING: lavapipe takes it too) splits its weights' time
    expect 0 env VKASR_DEVICE= VKASR_FORCE_STAGING=1 "$VKASR" transcribe -v -d vulkan -m "$M" "$WAV"
    grep -Eq "start-up: weights [0-9.]+ MiB copied .*; [0-9.]+ ms copying into the staging buffer, [0-9.]+ ms waiting \
for the device to free it$" "$WORK/err" || fail "staged -v: no split of the weights' upload"
fi
expect 0 env VKASR_DEVICE= "$VKASR" transcribe -v -d ref -m "$M" "$WAV"
grep -q " on CPU reference backend" "$WORK/err" || fail "-d ref: not the reference backend"
expect 2 "$VKASR" transcribe --threads 0 -m "$M" "$WAV"
# cuda in a build without the CUDA backend is a usage error (--device or $VKASR_DEVICE); the help says
# which device strings exist
expect 0 "$VKASR" transcribe --help;      grep -q "cuda\[:N\]" "$WORK/out" || fail "transcribe --help names cuda[:N]"
if ! "$VKASR" devices --help | grep -q "CUDA devices"; then
    expect 2 "$VKASR" transcribe -m "$M" -d cuda "$WAV"
    grep -q "without the CUDA backend" "$WORK/err" || fail "-d cuda without the backend says so"
    expect 2 env VKASR_DEVICE=cuda:0 "$VKASR" transcribe -m "$M" "$WAV"
fi
# f16 on a device without it (or with it disabled) is a device problem, not a model one
expect 5 env VKASR_DISABLE_F16=1 "$VKASR" transcribe -d vulkan -m "$M" -p f16 "$WAV"
grep -q "lacks f16" "$WORK/err" || fail "-p f16 without f16 says the device lacks f16"
# a write error on stdout is an I/O error (exit 4), for every command
if [ -c /dev/full ]; then
    expect 4 sh -c "'$VKASR' transcribe -np -m '$M' '$WAV' >/dev/full"
    grep -q "standard output" "$WORK/err" || fail "stdout write error not reported"
    expect 4 sh -c "'$VKASR' devices >/dev/full"
    expect 4 sh -c "'$VKASR' --help >/dev/full"
fi

# txt to stdout, same text from stdin ("-") and from a converted GGUF
expect 0 "$VKASR" transcribe -np -m "$M" "$WAV";    cp "$WORK/out" "$WORK/a.txt"
[ -s "$WORK/a.txt" ] || fail "empty transcript"
[ ! -s "$WORK/err" ] || fail "-np printed on stderr"
expect 0 sh -c "cat '$WAV' | '$VKASR' transcribe -np -m '$M' -"
cmp -s "$WORK/out" "$WORK/a.txt" || fail "stdin transcript differs"
# VKASR_ATTENTION_KERNEL: a name no kernel has is ignored, with a warning; the transcript is unchanged
expect 0 env VKASR_ATTENTION_KERNEL=no_such_kernel "$VKASR" transcribe -d vulkan -m "$M" "$WAV"
grep -q "VKASR_ATTENTION_KERNEL=no_such_kernel ignored: no attention kernel has that name" "$WORK/err" ||
    fail "VKASR_ATTENTION_KERNEL: an unknown name is named in a warning"
cmp -s "$WORK/out" "$WORK/a.txt" || fail "VKASR_ATTENTION_KERNEL with an unknown name changed the transcript"
expect 0 "$VKASR" convert "$M" -o "$WORK/m.gguf" --type f32
expect 0 "$VKASR" transcribe -np -m "$WORK/m.gguf" "$WAV"
cmp -s "$WORK/out" "$WORK/a.txt" || fail "GGUF transcript differs from the HF directory's"
expect 4 "$VKASR" convert "$M" -o "$WORK/no/such/dir/m.gguf"
# a model missing a shard is a model error (3), not an output error
mkdir -p "$WORK/nosh" && cp "$DATA"/tiny/ctc_sharded/* "$WORK/nosh/" && rm "$WORK/nosh/model-00002-of-00002.safetensors"
expect 3 "$VKASR" convert "$WORK/nosh" -o "$WORK/nosh.gguf"
grep -q "model-00002-of-00002.safetensors" "$WORK/err" || fail "convert names the missing shard"
# -o through a symlink writes its target and keeps the link; a FIFO is refused and left alone
echo old >"$WORK/target.gguf" && ln -s target.gguf "$WORK/link.gguf"
expect 0 "$VKASR" convert "$M" -o "$WORK/link.gguf" --type f32
[ -L "$WORK/link.gguf" ] || fail "convert replaced the symlink"
cmp -s "$WORK/target.gguf" "$WORK/m.gguf" || fail "convert through a symlink did not write its target"
mkfifo "$WORK/fifo.gguf"
expect 4 "$VKASR" convert "$M" -o "$WORK/fifo.gguf"
[ -p "$WORK/fifo.gguf" ] || fail "convert replaced a FIFO"
grep -q "fifo.gguf.*not a regular file" "$WORK/err" || fail "convert names the FIFO it refuses"

# json / srt / vtt on stdout
expect 0 "$VKASR" transcribe -np -m "$M" --format json "$WAV"
"$CHECK" json "$WORK/out" || fail "json output"
# a file name that is not UTF-8 still gives valid JSON (U+FFFD for the bad byte, control bytes escaped)
BADNAME="$WORK/$(printf 'bad\377name\001').wav"
cp "$WAV" "$BADNAME"
expect 0 "$VKASR" transcribe -np -m "$M" --format json "$BADNAME"
"$CHECK" json "$WORK/out" || fail "json output for a non-UTF-8 file name"
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys; f = json.loads(open(sys.argv[1], "rb").read())["file"]; sys.exit(not f.endswith("bad\ufffdname\x01.wav"))' \
        "$WORK/out" || fail "python3 json: the file name is not bad<U+FFFD>name<U+0001>.wav"
fi
expect 0 "$VKASR" transcribe -np -m "$M" --format srt "$WAV"
grep -Eq '^[0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3} --> [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}$' "$WORK/out" || fail "srt timing line"
head -1 "$WORK/out" | grep -q '^1$' || fail "srt numbering"
expect 0 "$VKASR" transcribe -np -m "$M" --format vtt "$WAV"
head -1 "$WORK/out" | grep -q '^WEBVTT' || fail "vtt header"
grep -Eq '^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} --> ' "$WORK/out" || fail "vtt timing line"

# --attention, --attention-threshold, --max-memory (the memory plan), and -v's report of them
expect 0 "$VKASR" transcribe -np -m "$M" --format json --attention local:4 "$WAV"
"$CHECK" attention "$WORK/out" local 4 || fail "--attention local:4"
expect 0 "$VKASR" transcribe -np -m "$M" --format json "$WAV"
"$CHECK" attention "$WORK/out" full || fail "auto attention on a short file is full"
expect 0 "$VKASR" transcribe -np -m "$M" --format json --attention-threshold 1 "$WAV"
"$CHECK" attention "$WORK/out" local 128 || fail "auto past --attention-threshold is local [128, 128]"
expect 0 "$VKASR" transcribe -np -m "$M" --format json --attention full --attention-threshold 1 "$WAV"
"$CHECK" attention "$WORK/out" full || fail "--attention full"
for bad in "--attention bogus" "--attention local:0" "--attention local:x" "--attention-threshold 0" \
    "--attention-threshold x" "--max-memory 12Q" "--max-memory -1G" "--max-memory 0" "--max-memory"; do
    expect 2 "$VKASR" transcribe -m "$M" $bad "$WAV"
done
expect 0 "$VKASR" transcribe -v -m "$M" --max-memory 1G "$WAV"
cmp -s "$WORK/out" "$WORK/a.txt" || fail "--max-memory 1G changed the transcript"
grep -q "attention: full" "$WORK/err" || fail "-v names the attention"
grep -Eq "memory plan: [0-9.]+ MiB of device memory = weights [0-9.]+ \+ activations" "$WORK/err" || fail "-v prints the plan"
grep -q "subsampling: one tile of" "$WORK/err" || fail "-v prints the subsampling tiles"
grep -Eq "device memory planned [0-9.]+ MiB, peak [0-9.]+ MiB; host peak [0-9.]+ MiB" "$WORK/err" ||
    fail "-v prints planned and peak device memory and the host peak"
for phase in "model file opened, mapped \([0-9.]+ MiB\) and validated in [0-9.]+ ms" "[a-z]+ device opened in" \
    "model file read into memory in" "weights [0-9.]+ MiB copied" "session created in" \
    "scratch memory [0-9.]+ MiB made in" "first transcription [0-9.]+ ms"; do
    grep -Eq "start-up: $phase" "$WORK/err" || fail "-v: no start-up line '$phase'"
done
[ "$(grep -c "start-up: first transcription" "$WORK/err")" -eq 1 ] || fail "-v: the first transcription's line not once"
expect 1 "$VKASR" transcribe -m "$M" --max-memory 1K "$WAV"
grep -q "not above the model's weights" "$WORK/err" || fail "--max-memory below the weights: the message"
# a cap between the weights and what the input needs: exit 1, the bytes needed and available named
expect 0 "$VKASR" transcribe -v -m "$M" "$WAV"
W=$(sed -nE 's/.*= weights ([0-9.]+) \+ activations.*/\1/p' "$WORK/err" | head -1)
expect 1 "$VKASR" transcribe -m "$M" --max-memory "$(awk -v w="$W" 'BEGIN { printf "%dK", w * 1024 + 16 }')" "$WAV"
grep -q "not enough device memory for .* it needs .* MiB available (max_memory" "$WORK/err" ||
    fail "--max-memory below the smallest chunks: the message"

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
# --dump errors name what could not be written: mel.npy (here a directory), or the dump directory
mkdir -p "$WORK/dumpbad/mel.npy"
expect 4 "$VKASR" transcribe -np -m "$M" --dump "$WORK/dumpbad" "$WAV"
grep -q "cannot write $WORK/dumpbad/mel.npy:" "$WORK/err" || fail "--dump error names mel.npy"
: >"$WORK/afile"
expect 4 "$VKASR" transcribe -np -m "$M" --dump "$WORK/afile/sub" "$WAV"
grep -q "cannot write $WORK/afile/sub:" "$WORK/err" || fail "--dump error names the directory"

# several inputs, one bad: both good ones transcribed, exit non-zero at the end
expect 4 "$VKASR" transcribe -np -m "$M" "$WAV" "$WORK/missing.wav" "$WAV"
[ "$(wc -l <"$WORK/out")" -eq 2 ] || fail "two transcripts expected past a bad input"

# Batches: the same output as one file per call, in input order, a bad input reported and skipped;
# manifests in and out (pred_text added to each line, relative paths from the manifest's directory, a
# WER summary where lines carry text); two sessions on one device (--devices 0,0); shards that together
# are the whole manifest, in order.
CLIPS=$DATA/audio/parity
set -- "$CLIPS"/*.wav
expect 0 "$VKASR" transcribe -np -m "$M" --format json "$@";                 cp "$WORK/out" "$WORK/one.json"
expect 0 "$VKASR" transcribe -np -m "$M" --format json --batch 2 "$@"
cmp -s "$WORK/out" "$WORK/one.json" || fail "--batch 2: output differs from one file per call"
# A batch that fails on the device is halved while it fails (VKASR_TEST_BATCH_FAIL_ABOVE=2: every batch
# of more than 2 inputs fails): 7 inputs run as 1 + 2 + 2 + 2, with the output of one input per call.
expect 0 "$VKASR" transcribe -np -m "$M" --format json "$@" "$1" "$2";      cp "$WORK/out" "$WORK/one7.json"
expect 0 env VKASR_TEST_BATCH_FAIL_ABOVE=2 "$VKASR" transcribe -v -m "$M" --format json --batch 7 "$@" "$1" "$2"
cmp -s "$WORK/out" "$WORK/one7.json" || fail "a failed batch, halved: output differs from one file per call"
grep -q "7 inputs in 4 batches" "$WORK/err" || { fail "a failed batch of 7: 4 batches expected (halves of halves)";
    grep -E "batches|failed" "$WORK/err" | sed 's/^/  stderr: /' | head -5; }
grep -q "warning: a batch of 7 inputs failed .*running it as batches of 3 and 4" "$WORK/err" ||
    fail "a failed batch: the warning names the halves"
[ "$(grep -c "warning: a batch of" "$WORK/err")" -eq 1 ] || fail "a failed batch: one warning per call (the rest at -v)"
grep -q "info: a batch of 4 inputs failed .*running it as batches of 2 and 2" "$WORK/err" ||
    fail "a failed batch: the halves' splits logged at info"
expect 4 "$VKASR" transcribe -np -m "$M" --batch auto "$1" "$WORK/missing.wav" "$2"
[ "$(wc -l <"$WORK/out")" -eq 2 ] || fail "--batch: two transcripts expected past a bad input"
grep -q "missing.wav" "$WORK/err" || fail "--batch: the bad input is named"
mkdir -p "$WORK/man/sub"
cp "$CLIPS"/*.wav "$WORK/man/sub/"
: >"$WORK/man/in.jsonl"
for f in "$CLIPS"/*.wav; do
    b=$(basename "$f")
    printf '{"audio_filepath": "sub/%s", "duration": 3.5, "text": "the quick brown fox", "id": "%s"}\n' "$b" "$b" \
        >>"$WORK/man/in.jsonl"
done
printf '{"audio_filepath": "sub/none.wav", "text": "x"}\n' >>"$WORK/man/in.jsonl"
expect 4 "$VKASR" transcribe -m "$M" --manifest "$WORK/man/in.jsonl" --output-manifest "$WORK/man/out.jsonl"
"$CHECK" manifest "$WORK/man/in.jsonl" "$WORK/man/out.jsonl" "$WORK/one.json" ||
    fail "--output-manifest: the input lines with pred_text, in order, the bad one left out"
grep -Eq "WER [0-9.]+ % \([0-9]+ errors.* over 20 reference words of 5 inputs with text\)" "$WORK/err" ||
    fail "--output-manifest: no WER summary over the 5 inputs with text"
grep -q "none.wav" "$WORK/err" || fail "--manifest: the missing file is named"
grep -Eq "6 inputs, [0-9.]+ s of audio in [0-9.]+ s on [12] worker\(s\): RTFx [0-9.]+, peak device memory" "$WORK/err" ||
    fail "--manifest: no summary line"
# --sessions auto: one session on a CPU device (lavapipe), two on a GPU (the default device is device 0
# where the tests run: lavapipe alone, or the GPU machine's one GPU)
sessions=2; "$VKASR" devices | sed -n 2p | grep -q "type *cpu" && sessions=1
grep -Eq " on $sessions worker\(s\): " "$WORK/err" || fail "--sessions auto: want $sessions session(s) on this device"
expect 4 "$VKASR" transcribe -m "$M" --manifest "$WORK/man/in.jsonl" --output-manifest "$WORK/man/out2.jsonl" \
    --devices 0,0 --batch 2
cmp -s "$WORK/man/out.jsonl" "$WORK/man/out2.jsonl" || fail "--devices 0,0: output manifest differs from one device"
grep -Eq "on 2 worker\(s\): .*; loading the model [0-9.]+ s, RTFx" "$WORK/err" ||
    fail "--devices 0,0: the summary line names one model loaded"
# --sessions 2: two workers on one model (auto, above, gives a CPU device one)
expect 4 "$VKASR" transcribe -m "$M" --manifest "$WORK/man/in.jsonl" --output-manifest "$WORK/man/out4.jsonl" \
    --sessions 2 --batch 1
cmp -s "$WORK/man/out.jsonl" "$WORK/man/out4.jsonl" || fail "--sessions 2: output manifest differs from one session"
grep -Eq "on 2 worker\(s\): .*; loading the model [0-9.]+ s, RTFx" "$WORK/err" ||
    fail "--sessions 2: the summary line names two workers and one model loaded"
# the first device by index and by name: two models, loaded at the same time on two threads
DEV0=$("$VKASR" devices | sed -n 's/^device 0: \([^ ,(]*\).*/\1/p' | head -n 1) # its first word
[ -n "$DEV0" ] || fail "devices names device 0"
expect 4 "$VKASR" transcribe -m "$M" --manifest "$WORK/man/in.jsonl" --output-manifest "$WORK/man/out3.jsonl" \
    --devices "0,$DEV0" --batch 2
cmp -s "$WORK/man/out.jsonl" "$WORK/man/out3.jsonl" || fail "--devices 0,NAME: output manifest differs from one device"
grep -Eq "on 2 worker\(s\): RTFx [0-9.]+, .*; loading the models [0-9.]+ s, RTFx [0-9.]+ after it" "$WORK/err" ||
    fail "--devices 0,NAME: no summary line with the models' loading time"
for devs in 0,99 99,0; do # a device that does not exist, loading beside one that does: named, nothing written
    expect 5 "$VKASR" transcribe -m "$M" --manifest "$WORK/man/in.jsonl" --devices $devs
    grep -q "^vkasr: 99: device index 99 out of range" "$WORK/err" || fail "--devices $devs: the missing device is named"
    [ ! -s "$WORK/out" ] || fail "--devices $devs: no transcript without every device"
done
: >"$WORK/man/shards.jsonl"
for k in 0 1 2; do
    code=0; [ $k -lt 2 ] || code=4 # the last shard holds the missing file
    expect $code "$VKASR" transcribe -np -m "$M" --manifest "$WORK/man/in.jsonl" --shard $k/3 \
        --output-manifest "$WORK/man/s$k.jsonl"
    cat "$WORK/man/s$k.jsonl" >>"$WORK/man/shards.jsonl"
done
cmp -s "$WORK/man/out.jsonl" "$WORK/man/shards.jsonl" || fail "--shard K/3: the shards do not make up the whole"
# Windows decoded ahead on several threads (--batch 2: windows of 8 inputs): a corrupt and a missing file
# in the middle each get their own error, in input order, as with one file per call; the transcripts are
# one file per call's, in order.
set -- "$CLIPS"/*.wav "$DATA/audio/not_audio.wav" "$CLIPS"/*.wav "$WORK/man/none2.wav" "$CLIPS"/*.wav
: >"$WORK/man/many.jsonl"
for f in "$@"; do printf '{"audio_filepath": "%s"}\n' "$f" >>"$WORK/man/many.jsonl"; done
expect 4 "$VKASR" transcribe -np -m "$M" --format json "$@"
cp "$WORK/out" "$WORK/many.json"
grep -E "not_audio|none2" "$WORK/err" >"$WORK/many.err"
expect 4 "$VKASR" transcribe -np -m "$M" --format json --manifest "$WORK/man/many.jsonl" --batch 2
cmp -s "$WORK/out" "$WORK/many.json" || fail "--manifest, windows decoded ahead: output differs from one file per call"
grep -E "not_audio|none2" "$WORK/err" | cmp -s - "$WORK/many.err" ||
    fail "--manifest, windows decoded ahead: the bad files' errors differ from one file per call's, or their order"
[ "$(wc -l <"$WORK/many.err")" -eq 2 ] || fail "--manifest, windows decoded ahead: want two errors, one per bad file"
for bad in "--batch 0" "--batch x" "--shard 3/3" "--shard 1" "--devices ,0" "-d 0 --devices 0" "--sessions 0" \
    "--sessions 9" "--sessions x"; do
    expect 2 "$VKASR" transcribe -m "$M" --manifest "$WORK/man/in.jsonl" $bad
done
expect 2 "$VKASR" transcribe -m "$M" --manifest "$WORK/man/in.jsonl" "$WAV"
expect 2 "$VKASR" transcribe -m "$M" --batch 2 -of "$WORK/base" "$WAV"
printf '{"audio": "x.wav"}\n' >"$WORK/man/bad.jsonl"
expect 2 "$VKASR" transcribe -m "$M" --manifest "$WORK/man/bad.jsonl"
grep -q "bad.jsonl:1: no audio_filepath" "$WORK/err" || fail "--manifest: a malformed line is named"

fi
if [ "$PART" != 1 ]; then

# --max-symbols caps the symbols emitted at one encoder frame. The TDT fixture never emits two at one
# frame, so the cap is tested where it binds: the RNN-T fixture (10, its model cap, at most frames) and
# the shipped TDT model (3 at one frame of speech_8k_f32.wav).
SHIPPED=$DATA/../../models/vkasr-tdt-tiny-en.gguf
for c in "$DATA/tiny/rnnt $DATA/audio/parity/short_okay.wav" "$SHIPPED $DATA/audio/speech_8k_f32.wav"; do
    set -- $c
    expect 0 "$VKASR" transcribe -np -m "$1" --format json "$2";  cp "$WORK/out" "$WORK/ms0.json"
    "$CHECK" frames "$WORK/ms0.json" 2 >/dev/null && fail "precondition: $1 emits no frame with 3+ symbols on $2"
    for cap in 2 1; do
        expect 0 "$VKASR" transcribe -np -m "$1" --format json --max-symbols $cap "$2"
        "$CHECK" frames "$WORK/out" $cap || fail "--max-symbols $cap exceeded ($1)"
        cmp -s "$WORK/out" "$WORK/ms0.json" && fail "--max-symbols $cap changed nothing ($1)"
    done
done

# --profile (and VKASR_PROFILE=1): per-op GPU times and the real-time factor on stderr (Vulkan: the CPU
# backend times no ops)
expect 0 "$VKASR" transcribe -d vulkan --profile -m "$M" "$WAV"
grep -q "profile linear " "$WORK/err" || fail "--profile lists per-op times (linear)"
grep -q "profile (all ops) " "$WORK/err" || fail "--profile prints the sum over ops"
grep -q "RTF" "$WORK/err" || fail "--profile prints the real-time factor"
expect 0 env VKASR_PROFILE=1 "$VKASR" transcribe -d vulkan -m "$M" "$WAV"
grep -q "profile linear " "$WORK/err" || fail "VKASR_PROFILE=1 prints the profile"

# Ctrl-C: the first SIGINT stops at the next poll, what was transcribed is printed (the file in progress
# marked partial) and the remaining inputs are skipped, exit 130; SIGTERM likewise with 143. The signal
# is sent once the first, short input is done (its timing line on stderr), so it lands in the second,
# which takes the shipped model seconds on lavapipe (between two inputs would be a matter of microseconds).
# interrupt SIG [SIG2]: runs 6 inputs in the background, sends SIG (then SIG2), waits; sets $status
interrupt() {
    LONG=$DATA/../../samples/sample.wav
    rm -f "$WORK/int.out" "$WORK/int.err"
    "$VKASR_BIN" transcribe -v -m "$SHIPPED" --format json "$WAV" "$LONG" "$LONG" "$LONG" "$LONG" "$LONG" \
        >"$WORK/int.out" 2>"$WORK/int.err" &
    pid=$!
    n=0
    while ! grep -q "s audio in" "$WORK/int.err" && kill -0 "$pid" 2>/dev/null && [ $n -lt 600 ]; do
        sleep 0.05; n=$((n + 1))
    done
    kill -"$1" "$pid"
    if [ $# -ge 2 ]; then sleep 0.05; kill -"$2" "$pid" 2>/dev/null; fi
    wait "$pid"; status=$?
}
# The input in progress is marked partial; on a GPU, where an input of the shipped model takes
# milliseconds, the signal may come between two inputs instead, which the CLI says, and then every line
# is a finished input.
check_interrupted() { # SIGNAME
    if grep -q "interrupted between inputs" "$WORK/int.err"; then
        echo "$1 came between two inputs (no input in progress to mark partial)"
        grep -q '"partial":true' "$WORK/int.out" && fail "$1 between inputs: an input is marked partial"
    else
        grep -q "interrupted: .*partial transcript" "$WORK/int.err" ||
            fail "$1: no 'interrupted ... partial' (or 'between inputs') line on stderr"
        tail -n 1 "$WORK/int.out" | grep -q '"partial":true' || fail "$1: the interrupted input is not marked partial"
        [ "$(wc -l <"$WORK/int.out")" -ge 2 ] || fail "$1: the finished first input is missing"
    fi
}
interrupt INT
[ "$status" -eq 130 ] || fail "SIGINT mid-run: exit $status (want 130)"
lines=$(wc -l <"$WORK/int.out")
{ [ "$lines" -ge 1 ] && [ "$lines" -lt 6 ]; } ||
    fail "SIGINT: $lines JSON lines (want the finished inputs, and the partial one)"
"$CHECK" json "$WORK/int.out" >/dev/null || fail "SIGINT: the JSON output is not valid"
head -n 1 "$WORK/int.out" | grep -q '"partial":false' || fail "SIGINT: the first (finished) input is marked partial"
check_interrupted SIGINT
interrupt TERM
[ "$status" -eq 143 ] || fail "SIGTERM mid-run: exit $status (want 143)"
check_interrupted SIGTERM
# A second SIGINT ends the process at once (killed by the signal: the shell reports 130 too).
interrupt INT INT
[ "$status" -eq 130 ] || fail "second SIGINT: exit $status (want 130)"

# A signal after the last input was delivered, while the device is being released (held there by the
# VKASR_TEST_HOLD_EXIT_MS hook), loses nothing: exit 0 and every result complete, one by one and batched.
# late ARGS...: transcribes in the background, sends SIGINT once the hook holds; sets $status
late() {
    rm -f "$WORK/late.out" "$WORK/late.err"
    VKASR_TEST_HOLD_EXIT_MS=30000 "$VKASR_BIN" transcribe -m "$SHIPPED" --format json "$@" >"$WORK/late.out" \
        2>"$WORK/late.err" &
    pid=$!
    n=0
    while ! grep -qs "VKASR_TEST_HOLD_EXIT_MS: holding" "$WORK/late.err" && kill -0 "$pid" 2>/dev/null &&
        [ $n -lt 1200 ]; do
        sleep 0.05; n=$((n + 1))
    done
    grep -q "VKASR_TEST_HOLD_EXIT_MS: holding" "$WORK/late.err" || fail "late SIGINT $*: the exit hook never held"
    kill -INT "$pid"; wait "$pid"; status=$?
}
for mode in one batch; do
    if [ $mode = one ]; then late "$WAV" "$WAV"; else late --batch 2 "$WAV" "$WAV"; fi
    [ "$status" -eq 0 ] || fail "SIGINT after the last input ($mode): exit $status (want 0)"
    [ "$(grep -c '"partial":false' "$WORK/late.out")" -eq 2 ] && ! grep -q '"partial":true' "$WORK/late.out" ||
        fail "SIGINT after the last input ($mode): want 2 complete results"
    grep -q "interrupted" "$WORK/late.err" && fail "SIGINT after the last input ($mode): reported as an interruption"
done

# Ctrl-C answers at once: 3 minutes of the sample in one file (full attention: the heaviest blocks),
# SIGINT 0.5 s into the subsampling; exit 130 with the partial result within 3 s of the signal.
# le32 N: N as 4 little-endian bytes.  long_wav IN OUT N: IN's samples N times over (IN: a canonical
# 44-byte WAV header, as the shipped sample has).
le32() { printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"; }
long_wav() {
    d=$(($(wc -c <"$1") - 44)) i=0
    { printf RIFF; le32 $((d * $3 + 36)); dd if="$1" bs=4 skip=2 count=8 2>/dev/null; le32 $((d * $3))
      while [ $i -lt "$3" ]; do tail -c +45 "$1"; i=$((i + 1)); done; } >"$2"
}
long_wav "$DATA/../../samples/sample.wav" "$WORK/long.wav" 11
rm -f "$WORK/int.out" "$WORK/int.err"
"$VKASR_BIN" transcribe -d vulkan -v -m "$SHIPPED" --format json "$WORK/long.wav" >"$WORK/int.out" 2>"$WORK/int.err" &
pid=$!
n=0
while ! grep -q "subsampling: " "$WORK/int.err" && kill -0 "$pid" 2>/dev/null && [ $n -lt 1200 ]; do
    sleep 0.05; n=$((n + 1))
done
sleep 0.5
t0=$(date +%s%N)
kill -INT "$pid"; wait "$pid"; status=$?
ms=$((($(date +%s%N) - t0) / 1000000))
echo "SIGINT 0.5 s into the subsampling of 182.8 s of audio: exit $status after $ms ms (bound 3000 ms)"
[ "$ms" -le 3000 ] || fail "SIGINT in a long file: the process ended $ms ms after the signal (bound 3000 ms)"
if [ "$status" -eq 0 ] && grep -q '"partial":false' "$WORK/int.out"; then
    # a fast GPU finishes the whole file before the signal (lavapipe needs many seconds)
    echo "  (the whole file was transcribed before the signal came: nothing left to interrupt)"
else
    [ "$status" -eq 130 ] || fail "SIGINT in a long file: exit $status (want 130)"
    grep -q '"partial":true' "$WORK/int.out" || fail "SIGINT in a long file: the result is not marked partial"
fi

# bench: synthetic audio of two lengths, a table and JSON; usage errors
expect 0 "$VKASR" bench --help;           grep -q -- "--seconds" "$WORK/out" || fail "bench --help lists --seconds"
grep -q -- "--warmup-ms" "$WORK/out" || fail "bench --help lists --warmup-ms"
expect 0 "$VKASR" bench -m "$M" --seconds 0.5,1 --runs 3 --warmup-ms 0
grep -Eq '^ +0.5s +[0-9.]+ \(' "$WORK/out" && grep -Eq '^ +1s +[0-9.]+ \(' "$WORK/out" || fail "bench table rows"
expect 0 "$VKASR" bench -m "$M" -s 0.5 -r 1 -w 0 --json
"$CHECK" bench "$WORK/out" 1 1 0 || fail "bench --json --warmup-ms 0 (one warm-up run)"
# (1200 ms: longer than the first run, which pays for the pipelines, so the warm-up must repeat)
expect 0 "$VKASR" bench -m "$M" -s 0.5 -r 3 -w 1200 --json
"$CHECK" bench "$WORK/out" 1 3 1200 || fail "bench --json --warmup-ms 1200"
for bad in "--seconds 0" "--seconds 1," "--seconds x" "--runs 0" "--runs 2x" "--warmup-ms -1" "--warmup-ms 1x" \
    "--warmup-ms 600001" "--frobnicate"; do
    expect 2 "$VKASR" bench -m "$M" $bad
done
expect 3 "$VKASR" bench -m "$DATA/no/such/model" --seconds 1 --runs 1

# live: --help and usage errors; WAV and raw PCM on stdin and --simulate give the same lines (without
# catch-up, windows, and so the text, depend only on the audio, not on when it arrives)
CLIP=$DATA/audio/heldout/h00000.wav   # "it cost four hundred nine dollars"; 16 kHz 16-bit mono, 44-byte header
expect 0 "$VKASR" live --help;            grep -q -- "--simulate" "$WORK/out" || fail "live --help lists --simulate"
expect 2 "$VKASR" live --speed 2
expect 2 "$VKASR" live --format s8
expect 2 "$VKASR" live --hop 0
expect 2 "$VKASR" live "$CLIP"
expect 3 "$VKASR" live -m "$DATA/no/such/model" --simulate "$CLIP"
# without -m and $VKASR_MODEL, live loads the streaming default (models/vkasr-rnnt-stream-tiny-en.gguf)
expect 0 env -u VKASR_MODEL "$VKASR" live -v --simulate "$CLIP" --speed 0
grep -q "loaded .*vkasr-rnnt-stream-tiny-en.gguf: RNN-T head" "$WORK/err" || fail "live without -m: not the streaming default"
expect 4 "$VKASR" live -m "$SHIPPED" --simulate "$WORK/missing.wav"
grep -q "missing.wav" "$WORK/err" || fail "live: the error names the missing file"
expect 0 "$VKASR" live -v --timestamps -m "$SHIPPED" --simulate "$CLIP" --speed 0;  cp "$WORK/out" "$WORK/live.txt"
grep -Eq '^\[00:00:[0-9]{2}\.[0-9]{3} --> 00:00:[0-9]{2}\.[0-9]{3}\]  it cost four hundred nine dollars$' "$WORK/live.txt" ||
    fail "live --simulate --timestamps: \"$(cat "$WORK/live.txt")\" (want one timed line: it cost four hundred nine dollars)"
grep -q "compute .* per audio second" "$WORK/err" || fail "live -v prints the stream's figures"
expect 0 sh -c "'$VKASR' live -np --timestamps --no-catch-up -m '$SHIPPED' <'$CLIP'"
cmp -s "$WORK/out" "$WORK/live.txt" || fail "live: WAV on stdin differs from --simulate"
tail -c +45 "$CLIP" >"$WORK/clip.raw"
expect 0 sh -c "cat '$WORK/clip.raw' | '$VKASR' live -np --timestamps --no-catch-up -m '$SHIPPED' --rate 16000 --format s16le"
cmp -s "$WORK/out" "$WORK/live.txt" || fail "live: raw PCM on stdin differs from --simulate"
# --json: the same segments as JSON lines with their words (two clips 1.5 s apart: two segments)
tail -c +45 "$DATA/audio/heldout/h00100.wav" >"$WORK/clip2.raw"
head -c 48000 /dev/zero >"$WORK/pause.raw"
cat "$WORK/clip.raw" "$WORK/pause.raw" "$WORK/clip2.raw" >"$WORK/two.raw"
expect 0 sh -c "'$VKASR' live -np --no-catch-up -m '$SHIPPED' <'$WORK/two.raw'";  cp "$WORK/out" "$WORK/two.txt"
[ "$(wc -l <"$WORK/two.txt")" -eq 2 ] || fail "live: a 1.5 s pause ends a segment (got: \"$(cat "$WORK/two.txt")\")"
expect 0 sh -c "'$VKASR' live -np --no-catch-up --json -m '$SHIPPED' <'$WORK/two.raw'"
"$CHECK" live "$WORK/out" "$WORK/two.txt" >"$WORK/check" || fail "live --json: $(cat "$WORK/check")"
# a WAV stream in a format vkasr does not read (IMA ADPCM) is an audio error
printf 'RIFF\044\000\000\000WAVEfmt \020\000\000\000\021\000\001\000\200\076\000\000\000\175\000\000\002\000\004\000data\000\000\000\000' >"$WORK/adpcm.wav"
expect 4 sh -c "'$VKASR' live -m '$SHIPPED' <'$WORK/adpcm.wav'"
grep -q "WAV format 17" "$WORK/err" || fail "live: unsupported WAV format named"
# Ctrl-C while reading standard input: what arrived is finished and printed, exit 130. The clip (48 KB of
# raw PCM) fits a pipe's buffer, so it is all there when vkasr starts; the signal follows its "input" line.
tail -c +45 "$DATA/audio/heldout/h00501.wav" >"$WORK/short.raw"
rm -f "$WORK/li.out" "$WORK/li.err" "$WORK/li.fifo" && mkfifo "$WORK/li.fifo"
"$VKASR_BIN" live -v -m "$SHIPPED" <"$WORK/li.fifo" >"$WORK/li.out" 2>"$WORK/li.err" &
pid=$!
exec 3>"$WORK/li.fifo"            # held open: vkasr sees no end of input
cat "$WORK/short.raw" >&3
n=0
while ! grep -q "vkasr: input 16000 Hz" "$WORK/li.err" && kill -0 "$pid" 2>/dev/null && [ $n -lt 600 ]; do
    sleep 0.05; n=$((n + 1))
done
sleep 2
kill -INT "$pid"; wait "$pid"; status=$?
exec 3>&-
[ "$status" -eq 130 ] || fail "live SIGINT: exit $status (want 130)"
[ "$(wc -l <"$WORK/li.out")" -eq 1 ] || fail "live SIGINT: the audio received was not finished (no final line)"

# devices
expect 0 "$VKASR" devices
grep -q "usable      yes" "$WORK/out" || fail "devices lists a usable device"


fi
echo "test_cli: $fails failure(s)"
[ "$fails" -eq 0 ]
