#!/bin/sh
# test_compare_int8.sh — `vkasr compare` judging the int8 path (lavapipe, VKASR_INT8=emu: the emulated
# int8 GEMM): the shipped streaming model (q8_0, every encoder product on the int8 path) on a short clip
# against the CPU backend passes with the int8 tolerances, the report says they applied and why (the
# device's int8 products), and the encoder's stages lie past the f16 tolerance, so the f16 one would
# have failed them (test_compare checks that runs without int8 products take the precision's tolerances,
# and the JSON fields); the layernorms' int8 rows leave the encoder's output bit for bit as it was.
# usage: test_compare_int8.sh VKASR MODEL AUDIO WORK_DIR
#   VKASR runs the CLI with validation recorded (a wrapper script, as for test_cli.sh)
set -u
VKASR=$1 MODEL=$2 AUDIO=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

VKASR_INT8=emu "$VKASR" compare -m "$MODEL" --devices vulkan,cpu -p f16 "$AUDIO" >"$WORK/out" 2>"$WORK/err" ||
    { fail "VKASR_INT8=emu: exit $?"; sed 's/^/  stderr: /' "$WORK/err" | head -5; }
grep -q "^  tolerances   int8 products: cpu ran 0 linear products on an int8 path (W8A8), vulkan [1-9]" "$WORK/out" ||
    fail "the report does not say that the int8 tolerances applied"
grep -q "^  result       every stage within its tolerance" "$WORK/out" || fail "not every stage within its tolerance"
# the encoder's rows ("  STAGE  ROWS x COLS  MAX-ABS  REL-L2  TOLERANCE  RESULT"): past the f16 tolerance
# of docs/compare.md (1e-2), within the int8 one
awk -v f16=1e-2 '
    $1 == "subsampling" || $1 == "layer" || $1 == "encoder" {
        n++; rel = $(NF - 2); tol = $(NF - 1)
        if (!(rel + 0 > f16 && rel + 0 <= tol + 0 && tol + 0 > f16 && $NF == "ok")) { print "FAIL: " $0; bad++ }
        if (n == 1 || rel + 0 < lo) lo = rel + 0
        if (rel + 0 > hi) hi = rel + 0
    }
    END { printf "%d encoder stages, relative L2 error %.3g .. %.3g, int8 tolerance %s\n", n, lo, hi, tol; exit n < 3 || bad }
' "$WORK/out" || fail "the encoder stages do not lie between the f16 and the int8 tolerance"

# The layernorms' int8 rows (op_layernorm.y8, which the products read instead of quantizing their x)
# change no bit of the encoder's output: the same transcription with VKASR_INT8_ROWS=0. The profile
# shows that the layernorms made them, and that the products' own passes became fewer.
for rows in 1 0; do
    VKASR_INT8=emu VKASR_INT8_ROWS=$rows "$VKASR" transcribe -m "$MODEL" -d vulkan -p f16 --profile \
        --dump "$WORK/dump$rows" "$AUDIO" >"$WORK/text$rows" 2>"$WORK/err$rows" ||
        fail "VKASR_INT8_ROWS=$rows: exit $?"
done
cmp -s "$WORK/dump1/encoder.npy" "$WORK/dump0/encoder.npy" ||
    fail "the encoder's output differs with the layernorms' int8 rows"
calls() { awk -v op="$2" '$3 == op { print $4 }' "$1"; }
made=$(calls "$WORK/err1" layernorm_rows8) own1=$(calls "$WORK/err1" linear_i8_quantize_x)
own0=$(calls "$WORK/err0" linear_i8_quantize_x)
echo "layernorms making int8 rows: ${made:-0} calls; the products' own passes: ${own1:-0}, ${own0:-0} without"
[ "${made:-0}" -gt 0 ] && [ "${own1:-0}" -lt "${own0:-0}" ] ||
    fail "the profile does not show the layernorms making the products' int8 rows"

echo "test_compare_int8: $fails failure(s)"
[ "$fails" -eq 0 ]
