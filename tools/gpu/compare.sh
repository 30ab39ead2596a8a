#!/bin/bash
# GPU machine, a build with -DVKASR_CUDA=ON: `vkasr compare --devices vulkan,cuda` (the Vulkan path
# against the CUDA backend on the same GPU, stage by stage) on the parity fixtures (every head and clip)
# and on the 0.6B-shaped random TDT model (tools/gpu/model06.sh) over 60 s and 10 min, f32 and
# f16. Writes every report (JSON and stderr) to $OUT/compare/ and the tables for docs/ to
# $OUT/compare/tables.md; prints one summary line per run. About 5 minutes on an H100.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; D=$OUT/compare; mkdir -p "$D"
V=build-gpu/tools/vkasr
TMP=${TMPDIR:-/tmp}
. tools/gpu/model06.sh
build-gpu/tools/vkasr compare -m tests/data/fixtures/ctc --devices cuda,vulkan tests/data/audio/parity/short_okay.wav \
    >/dev/null 2>"$D/probe.err"
if [ $? -eq 2 ] && grep -q "without the CUDA backend" "$D/probe.err"; then
    echo "build-gpu has no CUDA backend: configure it with -DVKASR_CUDA=ON (tools/gpu/README.md)"; exit 2
fi
# run NAME ARGS...: one comparison, its JSON report in $D/NAME.json; prints NAME, exit code, verdict
run() {
    name=$1; shift
    timeout 300 $V compare --devices vulkan,cuda --json -v "$@" >"$D/$name.json" 2>"$D/$name.err"
    rc=$?
    echo "$name rc=$rc $(grep -o '"ok":[a-z]*,"failed":.*' "$D/$name.json")"
}
for head in tdt rnnt ctc; do
    for clip in tests/data/audio/parity/*.wav; do
        for p in f32 f16; do run "fixture-$head-$(basename "$clip" .wav)-$p" -m tests/data/fixtures/$head -p $p "$clip"; done
    done
done
# the 0.6B-shaped TDT model (random weights; tools/gpu/model06.sh)
model06; echo "0.6B model rc=$?"
for secs in 60 600; do
    python3 tools/gpu/make_long_wav.py $secs "$TMP/a$secs.wav"
    for p in f32 f16; do run "tdt06b-${secs}s-$p" -m "$P06" -p $p "$TMP/a$secs.wav"; done
done
python3 tools/gpu/compare_table.py "$D"/fixture-*.json "$D"/tdt06b-*.json >"$D/tables.md"
head -n 40 "$D/tables.md" | grep -E "^\| (run|tdt06b|fixture-tdt-us_fox)"
