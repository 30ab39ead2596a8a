#!/bin/bash
# GPU machine, last call: wait for the training run, bring back the model and its log, measure the WER
# of vkasr on the whole held-out set (per voice) on the NVIDIA driver.
set -u
. tools/gpu/env.sh
bash tools/gpu/hold.sh 400
tail -40 /tmp/train.log; cp /tmp/train.log "$OUT/train-log.txt"
cp /tmp/trainout/vkasr-tdt-tiny-en.tar.gz.part* /tmp/trainout/heldout-sample.tar.gz /tmp/trainout/train_info.json "$OUT/" 2>&1
mkdir -p /tmp/model && cat /tmp/trainout/vkasr-tdt-tiny-en.tar.gz.part* | tar -xz -C /tmp/model
build-gpu/tools/vkasr convert /tmp/model/vkasr-tdt-tiny-en -o /tmp/tiny.gguf --type f16 && ls -l /tmp/tiny.gguf
. tools/train/espeak_env.sh && python3 tools/train/corpus.py heldout --out /tmp/heldout >/dev/null 2>&1
tools/train/eval_wer.sh -b build-gpu/tools/vkasr -m /tmp/tiny.gguf --details "$OUT/wer-details.txt" /tmp/heldout \
    2>&1 | tee "$OUT/wer.txt"
