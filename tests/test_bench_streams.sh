#!/bin/sh
# test_bench_streams.sh — `vkasr bench --streams`: the shipped cache-aware model's live streams at real
# time on the CPU backend (the JSON's figures there and consistent: quantiles in order, steps that
# advanced 1..N streams, a share of the wall time), the table's rows, --profile's ops on lavapipe (of a
# step, and of whole runs without --streams), the streaming default model without -m, and the refusals (a model that is not cache-aware, bad counts,
# several lengths): exit 2 with the reason.
# usage: test_bench_streams.sh VKASR STREAM_MODEL OFFLINE_MODEL WORK_DIR
set -u
VKASR=$1 STREAM=$2 OFFLINE=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect CODE PATTERN CMD...: the exit code and stderr holding PATTERN (grep -F)
expect() {
    want=$1 pat=$2; shift 2
    "$@" >"$WORK/out" 2>"$WORK/err"; got=$?
    [ "$got" -eq "$want" ] || { fail "exit $got (want $want): $*"; sed 's/^/  stderr: /' "$WORK/err" | head -3; }
    [ -z "$pat" ] || grep -qF -- "$pat" "$WORK/err" || { fail "stderr lacks '$pat': $*"; sed 's/^/  stderr: /' "$WORK/err" | head -3; }
}

expect 0 "" "$VKASR" bench --help
grep -q -- "--streams N\[,N...\]" "$WORK/out" || fail "bench --help lists --streams"
expect 2 "is not a cache-aware streaming model" "$VKASR" bench -m "$OFFLINE" -d cpu --streams 1
for bad in "--streams 0" "--streams 1,,2" "--streams x" "--streams 1 --seconds 1,2"; do
    # shellcheck disable=SC2086 # bad holds the options
    expect 2 "" "$VKASR" bench -m "$STREAM" -d cpu $bad
done

expect 0 "" "$VKASR" bench -m "$STREAM" -d cpu --streams 1,2 --seconds 2 --json
python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
rows = j["streams"]
assert j["lookahead_ms"] % 80 == 0 and j["lookahead_ms"] > 0 and j["seconds"] == 2, j
assert [r["streams"] for r in rows] == [1, 2], rows
for r in rows:
    l = r["latency_ms"]
    # a chunk is decoded after its last sample arrives; the steps are a share of the wall time
    assert 0 < l["p50"] <= l["p95"] <= l["max"] < 60000, r
    assert r["step_ms"] > 0 and 1 <= r["streams_per_step"] <= r["streams"], r
    assert 0 < r["steps_percent"] <= 100 and r["setup_ms"] >= 0 and isinstance(r["real_time"], bool), r
print("bench --streams JSON:", rows)' "$WORK/out" || fail "bench --streams --json: fields missing or inconsistent"

expect 0 "" "$VKASR" bench -m "$STREAM" -d cpu --streams 1 --seconds 1 --lookahead 160
grep -q "lookahead 160 ms" "$WORK/out" || fail "the table names the lookahead"
grep -Eq '^ +1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +(yes|NO)' "$WORK/out" ||
    { fail "bench --streams table row"; cat "$WORK/out"; }

# --profile on lavapipe (Vulkan's GPU timestamps): the ops of a step, which must hold the cache-aware
# attention (relpos_attention, once per layer and step at least) and add up to a positive time; none on
# the CPU backend (no timestamps), where the row stays as it was
expect 0 "" "$VKASR" bench -m "$STREAM" -d llvmpipe --streams 1 --seconds 0.7 --profile --json
python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["streams"][0]
ops = {o["op"]: o for o in r["ops"]}
att = ops["relpos_attention"]
assert att["calls"] > 0 and att["gpu_ms"] > 0, att
assert sum(o["gpu_ms"] for o in r["ops"]) > 0 and all(o["calls"] > 0 for o in r["ops"]), r["ops"]
print("bench --streams --profile:", sorted(ops))' "$WORK/out" || fail "bench --streams --profile: ops missing"
expect 0 "" "$VKASR" bench -m "$STREAM" -d cpu --streams 1 --seconds 1 --profile --json
python3 -c 'import json, sys; assert "ops" not in json.load(open(sys.argv[1]))["streams"][0]' "$WORK/out" ||
    fail "bench --streams --profile on the CPU backend: ops reported"

# --profile without --streams: the timed runs' ops per length on stderr (the offline model's encoder
# products among them)
expect 0 "GPU time per run by op (1 run)" "$VKASR" bench -m "$OFFLINE" -d llvmpipe --seconds 1 --runs 1 \
    --warmup-ms 0 --profile
grep -Eq '^vkasr: +linear +[0-9.]+ dispatches +[0-9.]+ ms' "$WORK/err" || fail "bench --profile: no linear row"

# without -m: the streaming default model, as vkasr live takes it
expect 0 "" env -u VKASR_MODEL "$VKASR" bench -d cpu --streams 1 --seconds 1
grep -q "vkasr-rnnt-stream-tiny-en" "$WORK/out" || fail "bench --streams without -m: not the streaming default"

[ "$fails" -eq 0 ] && echo "all checks passed"
exit $((fails > 0))
