#!/bin/bash
# GPU machine, idle GPU: the Realtime WebSocket under load (issue 49's figures). MODEL (default the
# shipped models/vkasr-rnnt-stream-tiny-en.gguf: a model that writes words, which the delta latency
# needs; MODEL=shape takes the 0.6B streaming shape, tools/make_shaped_model.py --streaming, whose random
# weights make mostly blank decisions: no words, throughput and errors only) served by `vkasr serve`
# (LOOKAHEAD: --lookahead, default the model's first), then tools/realtime_load.py at each of CLIENTS
# (default "1 64 256 1024") clients, each streaming RT_SECONDS (default 12) of speech at real time in 80
# ms binary PCM16 messages, starts spread over 2 s: delta latency p50/p95/max, errors, how late the
# clients' sends ran. One server per client count; each server's log in $OUT/realtime-N.log. Needs
# python3 with aiohttp. About 1 minute per client count.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
V=$PWD/build-gpu/tools/vkasr
MODEL=${MODEL:-models/vkasr-rnnt-stream-tiny-en.gguf}
CLIENTS=${CLIENTS:-1 64 256 1024}
LOOKAHEAD=${LOOKAHEAD:+--lookahead $LOOKAHEAD}
RT_SECONDS=${RT_SECONDS:-12}
PORT=${PORT:-8094}
ulimit -n 65536 2>/dev/null || ulimit -n 8192
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader

if [ "$MODEL" = shape ]; then
    MODEL=${TMPDIR:-/tmp}/shape
    [ -f "$MODEL/config.json" ] || python3 tools/make_shaped_model.py "$MODEL" --streaming >"$OUT/shape.log" 2>&1 ||
        { echo "making the streaming shape failed:"; tail -3 "$OUT/shape.log"; exit 1; }
fi
WAV=${TMPDIR:-/tmp}/rt60.wav
[ -f "$WAV" ] || python3 tools/gpu/make_long_wav.py 60 "$WAV" samples/sample.wav >/dev/null

for c in $CLIENTS; do
    # shellcheck disable=SC2086
    $V serve -m "$MODEL" --port $PORT $LOOKAHEAD --max-streams $((c + 8)) --max-concurrent $((c + 64)) \
        2>"$OUT/realtime-$c.log" &
    pid=$!
    wait_health $PORT
    printf '%s streams: ' "$c"
    python3 tools/realtime_load.py --url "ws://127.0.0.1:$PORT/v1/realtime?intent=transcription" --audio "$WAV" \
        --clients "$c" --seconds "$RT_SECONDS" --json
    kill -TERM $pid
    wait $pid
done
