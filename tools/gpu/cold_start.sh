# Sourced by bench.sh and quick.sh: run60 STATE HOME [ENV=VALUE...] — the process wall of one 60 s
# transcription (/tmp/a60.wav, model $G06, binary $V) with HOME (so the driver's shader cache,
# ~/.cache/nvidia or __GL_SHADER_DISK_CACHE_PATH, is HOME's) and vkasr's pipeline cache in $VC; prints
# the wall and the run's pipeline-cache line, its log in $OUT/cold-STATE.log.
run60() {
    local state=$1 home=$2; shift 2
    mkdir -p "$home/glcache"
    local t0=$(date +%s%N)
    env HOME="$home" __GL_SHADER_DISK_CACHE_PATH="$home/glcache" VKASR_CACHE_DIR="$VC" "$@" \
        timeout 120 "$V" transcribe -v -m "$G06" /tmp/a60.wav >/dev/null 2>"$OUT/cold-$state.log"
    local rc=$? t1=$(date +%s%N)
    echo "cold_start state=$state wall_ms=$(((t1 - t0) / 1000000)) rc=$rc"
    grep -o "pipeline cache: .*" "$OUT/cold-$state.log" | sed 's/^/    /'
}
