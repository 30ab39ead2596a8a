#!/bin/bash
# GPU machine, first call: start the default model's training in the background (its own session, so it
# outlives this command), then correctness on the NVIDIA driver: op tests with validation, the >2^31
# element test, the transformers fixtures and vkasr's parity against them (f32 and f16).
set -u
. tools/gpu/env.sh
if [ ! -e /tmp/train.started ]; then
    touch /tmp/train.started; mkdir -p /tmp/trainout
    setsid bash -c ". tools/train/espeak_env.sh && PYTHONUNBUFFERED=1 exec python3 tools/train/train.py \
        --minutes ${TRAIN_MIN:-24} --final --keep-ckpt --out /tmp/trainout" >/tmp/train.log 2>&1 </dev/null &
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
build-gpu/tools/vkasr devices 2>&1 | tee -a "$OUT/gpu.txt"
(cd build-gpu && ctest -L ops -j4 --output-on-failure --timeout 300) >"$OUT/ctest-ops.log" 2>&1
echo "ops rc=$?"; grep -E "tests passed|Failed|\(Failed|Timeout" "$OUT/ctest-ops.log"
python3 tools/fixtures/make_fixtures.py --clips tests/data/audio/parity --out /tmp/fx >"$OUT/fixtures.log" 2>&1
echo "fixtures rc=$?"; grep -E "ERROR|WARNING|NOTE|wrote" "$OUT/fixtures.log" | head -20
if [ -f /tmp/fx/parakeet_fixtures.tar.gz ]; then
    cp /tmp/fx/parakeet_fixtures.tar.gz "$OUT/"
    tar -xzf /tmp/fx/parakeet_fixtures.tar.gz -C tests/data/
    for h in tdt rnnt ctc; do
        build-gpu/tools/vkasr convert tests/data/fixtures/$h -o /tmp/$h.gguf --type f32
        for m in tests/data/fixtures/$h /tmp/$h.gguf; do
            for p in f32 f16; do
                echo "== $h $m $p"
                build-gpu/tests/test_parity $m tests/data/audio/parity tests/data/fixtures/$h/expected $p 1 1 report
            done
        done
    done >"$OUT/parity.log" 2>&1
    grep -E "^==|error|agreeing|FAIL" "$OUT/parity.log" | head -60
fi
[ -n "${BIG:-}" ] && { (time build-gpu/tests/test_big_tensor) >"$OUT/big-tensor.log" 2>&1; echo "big rc=$?"; tail -12 "$OUT/big-tensor.log"; }
(cd build-gpu && ctest -LE "ops|gpu" -j4 --output-on-failure --timeout 300) >"$OUT/ctest-rest.log" 2>&1
echo "rest rc=$?"; grep -E "tests passed|Failed|\(Failed|Timeout" "$OUT/ctest-rest.log"
echo "== training"; tail -8 /tmp/train.log
