#!/bin/sh
# test_compare.sh — `vkasr compare` on lavapipe: Vulkan against the C reference over the parity fixtures
# (TDT, RNN-T, CTC; f32 and f16) within every stage's tolerance with equal transcripts; a weight scaled
# on one backend (VKASR_TEST_PERTURB) makes it exit 1 naming the first stage it breaks; the JSON report
# checked by check_cli_output; the default devices; usage, model, audio and device errors.
# usage: test_compare.sh VKASR CHECKER DATA_DIR WORK_DIR
#   VKASR runs the CLI with validation recorded (a wrapper script, as for test_cli.sh)
set -u
VKASR=$1 CHECK=$2 DATA=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
FX=$DATA/fixtures
CLIP=$DATA/audio/parity/us_fox.wav
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect CODE CMD...: runs CMD (stdout to $WORK/out, stderr to $WORK/err), checks the exit code
expect() {
    want=$1; shift
    "$@" >"$WORK/out" 2>"$WORK/err"; got=$?
    [ "$got" -eq "$want" ] || { fail "exit $got (want $want): $*"; sed 's/^/  stderr: /' "$WORK/err" | head -5; }
}

# every head and precision: within tolerance (one JSON object, checked field by field); in f32 the tokens
# and transcripts are equal too (in f16 a near tie may flip a choice: the logits are what is judged)
for head in tdt rnnt ctc; do
    for p in f32 f16; do
        expect 0 "$VKASR" compare -m "$FX/$head" --devices vulkan,ref -p $p --json "$CLIP"
        "$CHECK" compare "$WORK/out" "$([ $p = f32 ] && echo equal || echo ok)" || fail "compare $head $p: report"
        grep -q "\"precision\":\"$p\"" "$WORK/out" || fail "compare $head $p: precision not in the report"
        # no int8 products (the fixtures hold f32 weights): the precision's tolerances
        grep -q "\"int8_products\":0,\"tolerances\":\"$p\"" "$WORK/out" || fail "compare $head $p: not $p tolerances"
    done
done
# the table
expect 0 "$VKASR" compare -m "$FX/tdt" --devices vulkan,ref "$CLIP"
for s in mel subsampling "layer 0" "layer 1" encoder logits tokens transcript; do
    grep -q "^  $s " "$WORK/out" || fail "table: no row for $s"
done
grep -q "result       every stage within its tolerance" "$WORK/out" || fail "table: no verdict"
# a usable CUDA device (a -DVKASR_CUDA=ON build on an NVIDIA machine) changes what the defaults hold
cuda=no
"$VKASR" devices 2>/dev/null | grep -A8 '^device cuda:' | grep -q 'usable *yes' && cuda=yes
# the CPU backend against the reference, stage by stage
expect 0 "$VKASR" compare -m "$FX/tdt" --devices cpu,ref "$CLIP"
grep -q "result       every stage within its tolerance" "$WORK/out" || fail "cpu,ref: not every stage within tolerance"
# the default devices: the best Vulkan device, then CUDA when usable, then the CPU backend and the
# reference (the fixture is small)
expect 0 "$VKASR" compare -m "$FX/ctc" --json "$CLIP"
"$CHECK" compare "$WORK/out" ok || fail "default devices: report"
grep -q '"baseline":{"device":"vulkan"' "$WORK/out" || fail "default devices: vulkan is not the baseline"
if [ $cuda = yes ]; then
    grep -q '"comparisons":\[{"device":"cuda".*{"device":"cpu".*{"device":"ref"' "$WORK/out" ||
        fail "default devices: cuda, cpu, ref are not compared"
else
    grep -q '"comparisons":\[{"device":"cpu".*{"device":"ref"' "$WORK/out" || fail "default devices: cpu, ref are not compared"
fi

# one backend perturbed: exit 1 naming the first stage it breaks, in the report and on stderr
perturbed() { # CODE STAGE PERTURBATION ARGS...
    code=$1 stage=$2 pert=$3; shift 3
    expect "$code" env VKASR_TEST_PERTURB="$pert" "$VKASR" compare --devices vulkan,ref --json "$@" "$CLIP"
    "$CHECK" compare "$WORK/out" "$stage" || fail "perturbed $pert: the report does not fail at $stage"
    grep -q "part at stage $stage " "$WORK/err" || fail "perturbed $pert: stderr does not name $stage"
}
# an attention output projection negated in layer 1 of the reference: layer 0 still agrees
perturbed 1 "layer 1" ref:encoder.layers.1.self_attn.o_proj.weight:-1 -m "$FX/tdt"
# the subsampling's linear scaled on Vulkan, f16: it and everything after fail
perturbed 1 subsampling vulkan:encoder.subsampling.linear.weight:1.1 -m "$FX/ctc" -p f16
# NaN weights in layer 0 of the baseline (a NaN in either device fails the stage)
perturbed 1 "layer 0" vulkan:encoder.layers.0.feed_forward1.linear1.weight:nan -m "$FX/ctc"
# the joint scaled by 1 %: the encoder agrees, the logits do not; the decoding paths part, so the
# reference is run again teacher-forced and every step is compared
perturbed 1 logits vulkan:joint.head.weight:1.01 -m "$FX/rnnt"
grep -q '"teacher_forced":true' "$WORK/out" || fail "perturbed joint: no teacher-forced rerun"
grep -Eq '"steps":([0-9]+),"compared_steps":\1,' "$WORK/out" || fail "perturbed joint: not every step compared"
# a perturbation naming a tensor the model lacks fails the load (a model error), naming it
expect 3 env VKASR_TEST_PERTURB=ref:no.such.tensor:2 "$VKASR" compare -m "$FX/tdt" --devices vulkan,ref "$CLIP"
grep -q "no.such.tensor" "$WORK/err" || fail "VKASR_TEST_PERTURB with an unknown tensor: not named"
expect 3 env VKASR_TEST_PERTURB=ref:joint.head.weight "$VKASR" compare -m "$FX/tdt" --devices vulkan,ref "$CLIP"

# usage and other errors
expect 0 "$VKASR" compare --help
grep -q -- "--devices" "$WORK/out" || fail "compare --help lists --devices"
expect 2 "$VKASR" compare -m "$FX/tdt"
expect 2 "$VKASR" compare -m "$FX/tdt" --devices vulkan "$CLIP"
expect 2 "$VKASR" compare -m "$FX/tdt" --devices vulkan,,ref "$CLIP"
expect 2 "$VKASR" compare -m "$FX/tdt" -p f8 "$CLIP"
expect 2 "$VKASR" compare -m "$FX/tdt" --bogus "$CLIP"
expect 2 "$VKASR" compare -m "$FX/tdt" "$CLIP" "$CLIP"
# asking for CUDA: a usage error in a build without it (exit 5, no device, in a CUDA build without a GPU);
# with a usable CUDA device it compares
if [ $cuda = yes ]; then
    expect 0 "$VKASR" compare -m "$FX/tdt" --devices cuda,ref "$CLIP"
else
    "$VKASR" compare -m "$FX/tdt" --devices cuda,ref "$CLIP" >"$WORK/out" 2>"$WORK/err"; got=$?
    { [ "$got" -eq 2 ] || [ "$got" -eq 5 ]; } || fail "--devices cuda,ref: exit $got (want 2, or 5 in a CUDA build)"
    grep -qi "cuda" "$WORK/err" || fail "--devices cuda,ref: the error does not mention CUDA"
fi
expect 3 "$VKASR" compare -m "$DATA/no/such/model" --devices vulkan,ref "$CLIP"
expect 4 "$VKASR" compare -m "$FX/tdt" --devices vulkan,ref "$WORK/missing.wav"
grep -q "missing.wav" "$WORK/err" || fail "audio error names the file"
expect 5 "$VKASR" compare -m "$FX/tdt" --devices vulkan,99 "$CLIP"

echo "test_compare: $fails failure(s)"
[ "$fails" -eq 0 ]
