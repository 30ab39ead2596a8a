#!/bin/sh
# fuzz.sh [SECONDS] [TARGET...] — builds the libFuzzer targets of tests/fuzz (clang; ASan + UBSan) in
# ./build-asan and runs each for SECONDS (default 20; 0 = no time limit) from its seed corpus
# (tests/fuzz/seeds.sh) and the corpus it grew in earlier runs (build-asan/fuzz/TARGET/corpus).
# TARGET: gguf safetensors hf_config tokenizer audio cli_output nemo nemo_pickle nemo_config nemo_spm
# rt_events (default: all).
# Environment: FUZZ_JOBS targets at a time (default 2); FUZZ_RUNS stop each after that many executions.
# Exits 1 when a target reports a finding (crash, sanitizer report, failed check, leak, timeout, memory
# limit); the input is kept as build-asan/fuzz/TARGET/crash-* (or leak-, timeout-, oom-), and
# build-asan/tests/fuzz/fuzz_TARGET FILE runs it again. docs/fuzzing.md says what to do with it.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
SECONDS_EACH=${1:-20}
[ $# -gt 0 ] && shift
TARGETS=${*:-gguf safetensors hf_config tokenizer audio cli_output nemo nemo_pickle nemo_config nemo_spm rt_events}
JOBS=${FUZZ_JOBS:-2}

sh scripts/setup.sh --test --no-build
# scripts/test.sh sets VKASR_REUSE_SHADERS: the main build's shaders are reused (scripts/glslc_reuse.sh)
reuse=""
[ -z "${VKASR_REUSE_SHADERS:-}" ] || reuse="-DVKASR_GLSLC=$root/scripts/glslc_reuse.sh"
# shellcheck disable=SC2086
CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVKASR_FUZZ=ON $reuse >/dev/null
# only the targets asked for (rt_events, for one, needs none of the library)
# shellcheck disable=SC2046
cmake --build build-asan -j "$(nproc 2>/dev/null || echo 2)" --target $(for t in $TARGETS; do echo "fuzz_$t"; done)

# Per-target libFuzzer options. Audio: short inputs keep decoding fast (the seeds' headers fit), and
# libmpg123 prints a note on stderr for each bad frame (-close_fd_mask=2 drops the target's stderr;
# libFuzzer's own report and the sanitizers' still come out).
options() {
    case $1 in
    audio) echo "-max_len=4096 -close_fd_mask=2" ;;
    cli_output) echo "-max_len=4096" ;;
    *) echo "" ;;
    esac
}

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"

run_one() {
    t=$1
    dir=build-asan/fuzz/$t
    mkdir -p "$dir/corpus"
    rm -f "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* "$dir"/slow-unit-*
    sh tests/fuzz/seeds.sh "$t" tests/data "$dir/seeds"
    case $t in
    hf_config | tokenizer | safetensors | rt_events) dict="-dict=tests/fuzz/json.dict" ;;
    gguf) dict="-dict=tests/fuzz/gguf.dict" ;;
    *) dict="" ;;
    esac
    runs=""
    [ -n "${FUZZ_RUNS:-}" ] && runs="-runs=$FUZZ_RUNS"
    # shellcheck disable=SC2046,SC2086
    if "build-asan/tests/fuzz/fuzz_$t" -max_total_time="$SECONDS_EACH" $runs $dict $(options "$t") \
        -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/" \
        "$dir/corpus" "$dir/seeds" >"$dir/log" 2>&1; then
        stats=$(grep -aE '^#[0-9]+[[:space:]]+DONE' "$dir/log" | tail -n 1 |
            sed 's/^#\([0-9]*\)[[:space:]]*DONE[[:space:]]*/\1 runs, /')
        echo "fuzz_$t: ok: $stats"
    else
        echo "fuzz_$t: FINDING (log: $dir/log):"
        grep -aE 'ERROR|SUMMARY|fuzz check failed|runtime error' "$dir/log" | head -n 5 | sed 's/^/    /'
        for a in "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*; do
            [ -f "$a" ] && echo "    input: $a (to replay it: build-asan/tests/fuzz/fuzz_$t $a)"
        done
        return 1
    fi
}

status=0
pids=""
for t in $TARGETS; do
    [ -f "tests/fuzz/fuzz_$t.c" ] || { echo "fuzz.sh: unknown target '$t'" >&2; exit 2; }
    run_one "$t" >"build-asan/fuzz-$t.out" 2>&1 &
    pids="$pids $!:$t"
    # at most JOBS at a time: wait for the oldest
    set -- $pids
    if [ $# -ge "$JOBS" ]; then
        p=${1%%:*}
        wait "$p" || status=1
        cat "build-asan/fuzz-${1#*:}.out"
        shift
        pids="$*"
    fi
done
for pt in $pids; do
    wait "${pt%%:*}" || status=1
    cat "build-asan/fuzz-${pt#*:}.out"
done
[ $status -eq 0 ] && echo "fuzz.sh: no findings (${SECONDS_EACH}s per target)" || echo "fuzz.sh: FINDINGS: see above"
exit $status
