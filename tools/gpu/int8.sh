#!/bin/bash
# GPU machine, idle GPU: the int8 path of q8_0 files (src/backend/vulkan/vk_op_gemm_i8.c) in one call of
# about 8 minutes. First the tests on this GPU (test_ops_int8: the real int8 kernel, the rows' and the
# weights' int8 forms against the C W8A8 reference, bit for bit; test_ops_quant: every q8_0 kernel
# against the f32 reference). Then the GEMM on the 0.6B encoder's products (bench_ops --shapes: q8_0 on
# the int8 path, q8_0 on the f16 tensor cores, f16 weights, every int8 tile on a few shapes; f16 x; each in a
# process of its own),
# `vkasr bench` of the 0.6B-shaped q8_0 file with the int8 path (with and without its layer norms' int8
# rows, VKASR_INT8_ROWS=0) and with VKASR_INT8=0 against its f16
# file (60 s and 10 min, f16 precision), and the q8_0 file's accuracy against the f16 file with the int8
# path on and off (quant_acc.sh), the encoder's output with and without the int8 rows (bit for bit), and
# `vkasr compare` of its int8 path against the CPU backend on 10 s
# (the stages against the int8 tolerance). Everything in $OUT: int8.log (the lines below), int8.md (the
# encoder table), int8-bench-*.json, quant-accuracy-int8*.md, compare-int8-*.txt.
# QTYPE=q4_k (or q5_k, q6_k) does the same for a k-quant file (its int8 form: each row dequantized and
# requantized once): the tests, then the file's bench and accuracy (bench_ops measures q8_0 weights only,
# so the GEMM part is left out).
set -u
QTYPE=${QTYPE:-q8_0}
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
B=build-gpu/tests
V=${V:-$PWD/build-gpu/tools/vkasr}
LOG=$OUT/int8.log
: >"$LOG"
nvidia-smi --query-gpu=name,driver_version,memory.used,utilization.gpu --format=csv,noheader | tee -a "$LOG"

for t in test_ops_int8 test_ops_quant; do
    timeout 300 $B/$t >"$OUT/$t.log" 2>&1
    echo "$t rc=$? $(tail -n 1 "$OUT/$t.log")" | tee -a "$LOG"
    grep -E "^FAIL|rounding tie|int8 tensor cores" "$OUT/$t.log" | head -20 | tee -a "$LOG"
done

# One (shape, configuration) per process (docs/gpu-results.md, "The machine and how to measure"). On every
# shape: q8_0 with the op's choice (the int8 path), q8_0 with VKASR_INT8=0 (f16 tensor cores) and f16
# weights; on TUNE_SHAPES also each int8 tile. kernel_ms and kernel_tops: the int8 GEMM dispatch alone;
# ms and tflops: the op (x's rows to int8 included).
SHAPES=${SHAPES:-"ff_up_7500 ff_down_7500 attn_proj_7500 pos_proj_7500 conv_pw1_7500 sub_lin_7500 joint_enc_7500
ff_up_750 ff_down_750 attn_proj_750 conv_pw1_750 sub_pw_750"}
TUNE_SHAPES=${TUNE_SHAPES:-"ff_up_7500 ff_down_7500 attn_proj_7500 ff_up_750 attn_proj_750"}
I8_TILES=$($B/bench_ops --cfg list | awk '$1 ~ /^q8_0_i8cm/ { print $1 }')
# bench_ops INT8 ARGS...: one bench_ops process with VKASR_INT8=INT8
bench_ops() {
    local i8=$1
    shift
    VKASR_INT8=$i8 timeout 60 $B/bench_ops -x f16 -i 10 --warmup 3 "$@" 2>&1 | grep -E "^gemm|rror" | tee -a "$LOG"
}
[ "$QTYPE" = q8_0 ] || SHAPES="" TUNE_SHAPES=""
for shape in $SHAPES; do
    bench_ops 1 --shapes "$shape" -w q8_0
    bench_ops 0 --shapes "$shape" -w q8_0
    bench_ops 1 --shapes "$shape" -w f16
done
for shape in $TUNE_SHAPES; do
    for cfg in $I8_TILES; do
        bench_ops 1 --shapes "$shape" -w q8_0 --cfg "$cfg"
    done
done

. tools/gpu/model06.sh
model06 || exit 1
Q8=${TMPDIR:-/tmp}/p06-$QTYPE.gguf # quant.sh's file
if [ ! -f "$Q8" ]; then
    timeout 300 $V convert "$G06" -o "$Q8.part" --type $QTYPE >"$OUT/convert-$QTYPE.log" 2>&1 && mv "$Q8.part" "$Q8" ||
        { rm -f "$Q8.part"; echo "convert $QTYPE failed: $(tail -n 1 "$OUT/convert-$QTYPE.log")" | tee -a "$LOG"; exit 1; }
fi
# bench NAME INT8 MODEL [ROWS]: vkasr bench with VKASR_INT8=INT8 (1: the int8 path where the GPU has it) and
# VKASR_INT8_ROWS=ROWS (0: every product quantizes its input itself, none takes its layer norm's rows)
bench() {
    VKASR_INT8=$2 VKASR_INT8_ROWS=${4:-1} timeout 400 $V bench -m "$3" -p f16 --seconds 60,600 --runs 3 --json \
        >"$OUT/int8-bench-$1.json" 2>"$OUT/int8-bench-$1.log"
    echo "bench $1 rc=$?" | tee -a "$LOG"
}
bench f16 1 "$G06"
bench $QTYPE-int8 1 "$Q8"
bench $QTYPE-int8-rows0 1 "$Q8" 0
bench $QTYPE-f16tc 0 "$Q8"
python3 - "$OUT" "$QTYPE" <<'PY' | tee "$OUT/int8.md" | tee -a "$LOG"
import json, sys
out, q = sys.argv[1], sys.argv[2]
rows = {}
for name in ("f16", f"{q}-int8", f"{q}-int8-rows0", f"{q}-f16tc"):
    try:
        j = json.load(open(f"{out}/int8-bench-{name}.json"))
    except (OSError, ValueError):
        continue
    rows[name] = {round(l["seconds"]): l for l in j["lengths"]}
print("| file / path | encoder ms 60 s | encoder ms 10 min | x f16 60 s | x f16 10 min | peak MiB 10 min |")
print("| --- | --- | --- | --- | --- | --- |")
for name, L in rows.items():
    f = lambda s: L[s]["encoder_ms"]["median"] if s in L else None
    r = lambda s: (f"{f(s) / rows['f16'][s]['encoder_ms']['median']:.2f}x" if "f16" in rows and s in rows["f16"]
                   and f(s) else "-")
    fmt = lambda v: f"{v:.1f}" if v else "-"
    print(f"| {name} | {fmt(f(60))} | {fmt(f(600))} | {r(60)} | {r(600)} | "
          f"{L[600]['peak_device_mib'] if 600 in L else '-'} |")
PY

ACC_WAV=${TMPDIR:-/tmp}/quant-acc-60s.wav
[ -f "$ACC_WAV" ] || python3 tools/gpu/make_long_wav.py 60 "$ACC_WAV"
for i8 in 1 0; do
    VKASR_INT8=$i8 V=$V tools/gpu/quant_acc.sh "$OUT/acc-int8-$i8" "$ACC_WAV" "$G06" "$Q8" >>"$LOG" 2>&1
    cp "$OUT/acc-int8-$i8/quant-accuracy.md" "$OUT/quant-accuracy-int8-$i8.md" 2>/dev/null
    echo "accuracy, VKASR_INT8=$i8:" | tee -a "$LOG"
    cat "$OUT/quant-accuracy-int8-$i8.md" 2>/dev/null | tee -a "$LOG"
done

# The layer norms' int8 rows change no bit: the encoder's output on the 60 s file with and without them
for r in 1 0; do
    rm -rf "${TMPDIR:-/tmp}/int8-rows$r" # an earlier run's dump must not stand in for a failed one
    VKASR_INT8=1 VKASR_INT8_ROWS=$r timeout 120 $V transcribe -m "$Q8" -p f16 --dump "${TMPDIR:-/tmp}/int8-rows$r" \
        "$ACC_WAV" >/dev/null 2>"$OUT/int8-rows$r.log"
done
if cmp -s "${TMPDIR:-/tmp}/int8-rows1/encoder.npy" "${TMPDIR:-/tmp}/int8-rows0/encoder.npy"; then
    echo "encoder output with and without the layer norms' int8 rows: identical"
else
    echo "encoder output with and without the layer norms' int8 rows: DIFFERENT (or missing: int8-rows*.log)"
fi | tee -a "$LOG"

# vkasr compare of the file's int8 path against the CPU backend (f32 products of the dequantized weights)
# on 10 s: every stage's error against the int8 tolerance (docs/compare.md, "int8 products")
CMP_WAV=${TMPDIR:-/tmp}/int8-compare-10s.wav
[ -f "$CMP_WAV" ] || python3 tools/gpu/make_long_wav.py 10 "$CMP_WAV"
VKASR_INT8=1 timeout 400 $V compare -m "$Q8" --devices vulkan,cpu -p f16 "$CMP_WAV" >"$OUT/compare-int8-$QTYPE.txt" 2>&1
echo "compare $QTYPE (int8 path) against cpu rc=$?" | tee -a "$LOG"
grep -E "^  (tolerances|subsampling|layer|encoder|logits|tokens|result) " "$OUT/compare-int8-$QTYPE.txt" | tee -a "$LOG"
