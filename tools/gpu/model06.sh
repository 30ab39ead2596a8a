# Sourced by the GPU scripts: the 0.6B-shaped random TDT model that their figures use, made once per
# machine and shared — P06 (the Hugging Face directory, tools/fixtures/bench_pytorch.py --save) and G06
# (its f16 GGUF). Needs V (the vkasr binary). model06 makes whichever is missing; returns non-zero
# (and says why) when it cannot.
P06=${P06:-${TMPDIR:-/tmp}/p06}
G06=${G06:-${TMPDIR:-/tmp}/p06.gguf}
model06() {
    if [ ! -f "$P06/config.json" ]; then
        rm -rf "$P06"
        timeout 400 python3 tools/fixtures/bench_pytorch.py --save "$P06" --save-only --out "${TMPDIR:-/tmp}" \
            >"${TMPDIR:-/tmp}/model06.log" 2>&1 ||
            { echo "making the 0.6B-shaped model failed:"; tail -5 "${TMPDIR:-/tmp}/model06.log"; return 1; }
    fi
    [ -f "$G06" ] || timeout 200 "$V" convert "$P06" -o "$G06" --type f16 >>"${TMPDIR:-/tmp}/model06.log" 2>&1 ||
        { echo "converting the 0.6B-shaped model failed:"; tail -3 "${TMPDIR:-/tmp}/model06.log"; return 1; }
}
