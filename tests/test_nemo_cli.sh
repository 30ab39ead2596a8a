#!/bin/sh
# test_nemo_cli.sh — .nemo checkpoints through the CLI: the same weights as .nemo, HF directory and GGUF
# convert to the same GGUF bytes and give byte-identical features, encoder outputs and transcripts (TDT,
# RNN-T, gzip CTC, a hybrid); --decoder on a hybrid and on one-head models; malformed files exit 3.
# usage: test_nemo_cli.sh VKASR DATA_DIR WORK_DIR
set -u
VKASR=$1 DATA=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
CLIP=$DATA/audio/parity/us_fox.wav
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect() { # expect CODE CMD...: stdout to $WORK/out, stderr to $WORK/err, checks the exit code
    want=$1; shift
    "$@" >"$WORK/out" 2>"$WORK/err"; got=$?
    [ "$got" -eq "$want" ] || { fail "exit $got (want $want): $*"; sed 's/^/  stderr: /' "$WORK/err" | head -5; }
}
same() { cmp -s "$1" "$2" || fail "$1 and $2 differ"; }
# run MODEL OUT [ARGS...]: transcribe the clip in f32, keeping features, encoder output and JSON
run() {
    m=$1 o=$2; shift 2
    expect 0 "$VKASR" transcribe -m "$m" -p f32 -np --dump "$o" -oj -of "$o" "$@" "$CLIP"
}

for pair in tdt:tdt_ctc.nemo rnnt:rnnt.nemo ctc:ctc_gz.nemo; do
    head=${pair%%:*} nemo=$DATA/nemo/${pair#*:}
    # a link without the extension: recognised by content, and named as the HF directory is (the GGUF
    # stores the name)
    ln -s "$nemo" "$WORK/$head" || exit 1
    expect 0 "$VKASR" convert "$WORK/$head" -o "$WORK/$head.nemo.gguf" --type f32
    expect 0 "$VKASR" convert "$DATA/fixtures/$head" -o "$WORK/$head.hf.gguf" --type f32
    same "$WORK/$head.nemo.gguf" "$WORK/$head.hf.gguf"
    run "$nemo" "$WORK/$head.nemo"
    run "$DATA/fixtures/$head" "$WORK/$head.hf"
    run "$WORK/$head.nemo.gguf" "$WORK/$head.gguf"
    for src in hf gguf; do
        for f in mel.npy encoder.npy; do same "$WORK/$head.nemo/$f" "$WORK/$head.$src/$f"; done
        same "$WORK/$head.nemo.json" "$WORK/$head.$src.json"
    done
    grep -q "\"head\":\"$head\"" "$WORK/$head.nemo.json" || fail "$head: the JSON names the head"
    grep -q '"tokens":\[{' "$WORK/$head.nemo.json" || fail "$head: tokens in the JSON"
done

# the hybrid's CTC head: over the same encoder as its TDT head; a GGUF of it decodes the same
H=$DATA/nemo/tdt_ctc.nemo
run "$H" "$WORK/hyb_ctc" --decoder ctc
grep -q '"head":"ctc"' "$WORK/hyb_ctc.json" || fail "hybrid --decoder ctc: the JSON names the CTC head"
same "$WORK/hyb_ctc/encoder.npy" "$WORK/tdt.nemo/encoder.npy"
cmp -s "$WORK/hyb_ctc.json" "$WORK/tdt.nemo.json" && fail "hybrid --decoder ctc: the TDT transcript"
expect 0 "$VKASR" convert "$H" --decoder ctc -o "$WORK/hyb_ctc.gguf" --type f32
run "$WORK/hyb_ctc.gguf" "$WORK/hyb_ctc_gguf"
same "$WORK/hyb_ctc.json" "$WORK/hyb_ctc_gguf.json"
run "$H" "$WORK/hyb_tdt" --decoder tdt
same "$WORK/hyb_tdt.json" "$WORK/tdt.nemo.json"

# a head the model lacks: refused, naming the heads it has
expect 3 "$VKASR" transcribe -m "$H" --decoder rnnt -np "$CLIP"
grep -q "has a TDT head and a CTC head; the RNN-T head" "$WORK/err" || fail "hybrid --decoder rnnt: reason"
expect 3 "$VKASR" transcribe -m "$DATA/fixtures/tdt" --decoder ctc -np "$CLIP"
grep -q "has only a TDT head; the CTC head" "$WORK/err" || fail "TDT --decoder ctc: reason"
expect 3 "$VKASR" transcribe -m "$DATA/nemo/rnnt.nemo" --decoder ctc -np "$CLIP"
grep -q "has only a RNN-T head; the CTC head" "$WORK/err" || fail "RNN-T .nemo --decoder ctc: reason"
expect 3 "$VKASR" convert "$WORK/tdt.nemo.gguf" --decoder rnnt -o "$WORK/x.gguf"
[ -e "$WORK/x.gguf" ] && fail "convert of a missing head wrote a file"
expect 2 "$VKASR" transcribe -m "$H" --decoder hybrid "$CLIP"
for cmd in transcribe live bench compare serve convert; do
    "$VKASR" $cmd --help 2>/dev/null | grep -q -- "--decoder D" || fail "$cmd --help lists --decoder"
done

# malformed checkpoints: exit 3 with the file and the reason
refuse() {
    expect 3 "$VKASR" transcribe -m "$DATA/nemo/$1" -np "$CLIP"
    grep -q "$1" "$WORK/err" && grep -q "$2" "$WORK/err" || fail "$1: message '$(cat "$WORK/err")' lacks '$2'"
}
refuse bad_global.nemo "refused global '__builtin__.eval'"
refuse bad_option.nemo "'encoder.subsampling' = \"striding\" is not supported"
refuse missing_tensor.nemo "missing tensor 'encoder.layers.0.norm_out.bias'"
refuse truncated.nemo "runcated"
refuse legacy.nemo "legacy (pre-zip) PyTorch checkpoint"
head -c 4096 "$H" >"$WORK/cut.nemo"
expect 3 "$VKASR" transcribe -m "$WORK/cut.nemo" -np "$CLIP"

echo "test_nemo_cli: $fails failures"
[ "$fails" -eq 0 ]
