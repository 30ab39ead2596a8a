#!/bin/sh
# test.sh [--sanitize] — the test command (README, .ci/run). Sets everything up (scripts/setup.sh --test)
# and runs, on lavapipe (Mesa's CPU Vulkan driver) with the Khronos validation layer:
#   1. the fuzz smoke: each libFuzzer target of tests/fuzz for FUZZ_SECONDS (default 5; scripts/fuzz.sh),
#      from its seeds and earlier runs' corpus: a check that no easy finding came in (docs/fuzzing.md);
#   2. the sanitizer tests (--sanitize runs only these): the unit, model-loader, audio, API and CLI tests
#      built with clang's AddressSanitizer + UBSan in ./build-asan (only what they run is built), on the
#      CPU backend but for the tests of the Vulkan backend's host code (tests/CMakeLists.txt says why), the
#      thread tests with ThreadSanitizer in ./build-tsan; not the tests labelled slow (seconds of lavapipe's
#      or the CPU backend's compute whose host code the others run);
#   3. where the CUDA toolkit is installed (nvcc on PATH or in /usr/local/cuda), a compile-and-link-only
#      build of the CUDA backend in ./build-cuda (-DVKASR_CUDA=ON, -O0; PTX only, as no GPU here could run
#      the default architectures' Hopper machine code, which doubles nvcc's time): the libraries and the
#      CLI (the tests' sources are the main build's; they need an NVIDIA GPU: tools/gpu/cuda_check.sh
#      builds and runs them there);
#   4. the test suite (CTest, ./build): every test but those that passed in stage 2, so that each test runs
#      once (those run the same code there, under the sanitizers; where stage 2 failed, everything).
# The TSan build and the CUDA build start in the background at the lowest priority right after stage 1
# (below: they fill the CPU time the other stages leave idle). The extra builds take the main build's
# compiled shaders where their sources did not change since (scripts/glslc_reuse.sh: the SPIR-V does not
# depend on C flags). Each stage prints its duration.
# Exits non-zero when any stage finds anything. The last line is CTest's summary line of stage 4 (which
# first says how many tests stage 2 ran).
set -eu
cd "$(dirname "$0")/.."
sanitize_only=0
for a in "$@"; do
    case $a in
    --sanitize) sanitize_only=1 ;;
    *)
        echo "usage: test.sh [--sanitize]" >&2
        exit 2
        ;;
    esac
done
JOBS=$(nproc 2>/dev/null || echo 2)
ASAN_PASSED="" ASAN_COUNT=0
export VKASR_REUSE_SHADERS="$PWD/build/shaders"
REUSE="-DVKASR_GLSLC=$PWD/scripts/glslc_reuse.sh"
LOG=$(mktemp "${TMPDIR:-/tmp}/vkasr-test.XXXXXX")
trap 'rm -f "$LOG" "$LOG.rc"' EXIT

# ctest_run BUILD_DIR [CTEST ARGS...]: output shown as it comes and kept in $LOG; returns ctest's status
ctest_run() {
    dir=$1
    shift
    { ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$JOBS" "$@"; echo $? >"$LOG.rc"; } 2>&1 |
        tee "$LOG"
    return "$(cat "$LOG.rc")"
}

summary() { grep -E '^[0-9]+% tests passed' "$LOG" | tail -n 1; }

# stage NAME: announces a stage and prints how long the previous one took
stage_t0=$(date +%s)
stage_name=""
stage() {
    now=$(date +%s)
    [ -z "$stage_name" ] || echo "=== $stage_name: $((now - stage_t0)) s"
    stage_t0=$now
    stage_name=$1
    [ -z "$1" ] || echo "=== $1"
}

# Stage 2. Not in the sanitizer set: test_install builds an application against the installed library
# with the system compiler's default flags, which cannot link a sanitized library; check_layers and
# check_shaders_listed read sources and object files and run nothing this build compiled (the whole
# suite runs them).
ASAN_EXCLUDE='^(test_install|check_layers|check_shaders_listed)$'
# What those tests run (CTest reports any test whose program was not built): the CLI, the test programs
# of the labels above, the fuzz targets' replays. Not the op tests, benchmarks, parity, decoder, abort and
# GTK programs, whose tests are not in the sanitizer set.
ASAN_TARGETS="vkasr_cli check_cli_output example_transcribe test_api test_arena test_audio test_batch test_cpu_gemm
test_device_memory test_gguf_foreign test_header_c test_header_cxx test_hub test_live test_long_audio test_merge
test_mel test_model_io test_model_wer test_nemo test_plan test_planner test_quant test_subtitles test_threads
test_transcript test_wer replay_gguf replay_safetensors replay_hf_config replay_tokenizer replay_audio replay_cli_output
replay_nemo replay_nemo_pickle replay_nemo_config replay_nemo_spm replay_rt_events"
# (Called where set -e does not apply: every step checks its status.)
sanitizer_tests() {
    stage "sanitizer tests: ASan + UBSan (build-asan)"
    CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVKASR_FUZZ=ON "$REUSE" \
        >/dev/null || return 1
    # shellcheck disable=SC2086
    cmake --build build-asan -j "$JOBS" --target $ASAN_TARGETS || return 1
    asan=0
    ctest_run build-asan -L 'unit|model|audio|api|cli' -LE slow -E "$ASAN_EXCLUDE" || asan=1
    # the tests that passed here are not run again in the plain suite (stage 4), but for fixture set-ups
    # (a converted model), whose outputs other tests there read
    if [ $asan -eq 0 ]; then
        ASAN_PASSED=$(ctest --test-dir build-asan --show-only=json-v1 -L 'unit|model|audio|api|cli' -LE slow \
            -E "$ASAN_EXCLUDE" | python3 -c 'import json, sys
print("|".join(t["name"] for t in json.load(sys.stdin)["tests"]
               if not any(p["name"] == "FIXTURES_SETUP" for p in t.get("properties", []))))')
        ASAN_COUNT=$(echo "$ASAN_PASSED" | tr '|' '\n' | grep -c .)
    fi
    stage "sanitizer tests: TSan, the thread tests (build-tsan)"
    [ -n "$BG_TSAN" ] || rm -f build-tsan/build.log
    [ -z "$BG_TSAN" ] || wait "$BG_TSAN" || true
    tsan_build "$JOBS" || { tail -n 40 build-tsan/build.log; return 1; }
    tsan=0
    ctest_run build-tsan -L threads -LE slow || tsan=1
    [ $asan -eq 0 ] && [ $tsan -eq 0 ]
}

# The TSan tests' build and the CUDA compile check (stage 3) are started in the background at the lowest
# priority, one job each, as soon as the main build is done: they take only the CPU time that the fuzz
# smoke and the ASan tests leave idle (link steps, a stage's last test running alone). Where they are
# needed, the script waits for them and runs the same build again in the foreground, which finishes what
# is left (or finds it up to date) and gives the status. NICE: the background's command prefix.
BG_TSAN="" BG_CUDA="" NICE=""
tsan_build() {
    mkdir -p build-tsan
    { CC=clang-14 CXX=clang++-14 cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVKASR_SANITIZE=thread \
        "$REUSE" && $NICE cmake --build build-tsan -j "$1" --target test_threads test_api test_stream_cache; } >>build-tsan/build.log 2>&1
}
NVCC=$(command -v nvcc 2>/dev/null || true)
[ -n "$NVCC" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || NVCC=/usr/local/cuda/bin/nvcc
cuda_build() {
    mkdir -p build-cuda
    # unoptimised, without debug info: this build only has to compile and link (the main build compiles
    # the same C with optimisation and its warnings); a fifth less time than RelWithDebInfo
    { cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-O0 -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
        -DCMAKE_CUDA_FLAGS_DEBUG=-O0 -DVKASR_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" \
        -DVKASR_CUDA_ARCHITECTURES=80-virtual "$REUSE" &&
        $NICE cmake --build build-cuda -j "$1" --target vkasr vkasr_static vkasr_cli; } >>build-cuda/build.log 2>&1
}
background_builds() {
    rm -f build-tsan/build.log build-cuda/build.log
    NICE="nice -n 19"
    tsan_build 1 </dev/null &
    BG_TSAN=$!
    if [ -n "$NVCC" ]; then
        cuda_build 1 </dev/null &
        BG_CUDA=$!
    fi
    NICE=""
}

if [ $sanitize_only -eq 1 ]; then
    sh scripts/setup.sh --test --no-build
    status=0
    sanitizer_tests || status=1
    stage ""
    summary
    exit $status
fi

stage "setup and build"
sh scripts/setup.sh --test
background_builds
failed=""
stage "fuzz smoke: ${FUZZ_SECONDS:-5} s per target"
sh scripts/fuzz.sh "${FUZZ_SECONDS:-5}" || failed="$failed fuzz-smoke"
sanitizer_tests || failed="$failed sanitizer-tests"
if [ -n "$NVCC" ]; then
    stage "the CUDA backend with $NVCC (build-cuda; compile and link only)"
    [ -z "$BG_CUDA" ] || wait "$BG_CUDA" || true
    if ! cuda_build "$JOBS"; then
        tail -n 40 build-cuda/build.log
        failed="$failed cuda-build(build-cuda/build.log)"
    fi
fi
stage "the test suite (build)"
status=0
if [ -n "$ASAN_PASSED" ]; then
    echo "($ASAN_COUNT tests that passed in the sanitizer stage above are not run again)"
    ctest_run build -E "^($ASAN_PASSED)\$" || status=1
else
    ctest_run build || status=1
fi
stage ""
if [ -n "$failed" ]; then
    echo "test.sh: FAILED before the test suite:$failed (see above)"
    status=1
fi
summary
exit $status
