#!/bin/bash
# GPU machine, idle GPU: the server against offline packed batches in one call (issue 51's targets) on the
# 0.6B-shaped f16 model (model06.sh's): offline, `vkasr transcribe --manifest --batch auto` over 256
# inputs of the batch set (tools/gpu/make_batch_set.py; its summary line gives the RTFx after the model
# load); then `vkasr serve` with its defaults, loaded by tools/serve_load.py with requests of 2-20 s cut
# from 10 minutes of speech, at each of CLIENTS (default "8 32 64 256") concurrent clients, REQS (default
# 4) requests each (the throughput and p50/p95 latency; each server's log in $OUT/serve-N.log). SERVE_ARGS adds
# server options (e.g. "--sessions 1 --batch-wait-ms 5" for the earlier rule); V another vkasr binary (an
# A/B in one call). About 3 minutes.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
V=${V:-$PWD/build-gpu/tools/vkasr}
SET=${SET:-${TMPDIR:-/tmp}/batchset}
CLIENTS=${CLIENTS:-8 32 64 256}
REQS=${REQS:-4}
SERVE_ARGS=${SERVE_ARGS:-}
PORT=${PORT:-8093}
nvidia-smi --query-gpu=index,name,driver_version,memory.used,utilization.gpu --format=csv,noheader

. tools/gpu/model06.sh
model06 || exit 1
[ -f "$SET/manifest.jsonl" ] || python3 tools/gpu/make_batch_set.py 1000 "$SET"
head -n 256 "$SET/manifest.jsonl" >"$SET/serve256.jsonl"
[ -f /tmp/a600.wav ] || python3 tools/gpu/make_long_wav.py 600 /tmp/a600.wav >/dev/null

# offline: a first run fills the pipeline cache, the second is the figure
$V transcribe -np -m "$G06" --manifest "$SET/serve256.jsonl" --batch auto >/dev/null 2>&1
$V transcribe -m "$G06" --manifest "$SET/serve256.jsonl" --batch auto >/dev/null 2>"$OUT/serve-offline.log"
echo "offline: $(grep -o '[0-9]* inputs, .*' "$OUT/serve-offline.log" | tail -1)"

k=0
for c in $CLIENTS; do
    k=$((k + 1))
    log=$OUT/serve-$c.log # a count named twice (CLIENTS="64 64": the second server finds the first's caches)
    [ ! -f "$log" ] || log=$OUT/serve-$c-$k.log
    # shellcheck disable=SC2086
    $V serve -m "$G06" --port $PORT --max-queue 4096 --max-concurrent 512 $SERVE_ARGS 2>"$log" &
    pid=$!
    wait_health $PORT
    echo "server, $c clients:"
    python3 tools/serve_load.py --url http://127.0.0.1:$PORT --clients "$c" --requests "$REQS" --audio /tmp/a600.wav |
        sed 's/^/    /'
    kill -TERM $pid
    wait $pid
    echo "    largest turn: $(sed -n 's/^vkasr serve: turn of \([0-9]*\) request.*/\1/p' "$log" |
        sort -n | tail -1) requests"
done
