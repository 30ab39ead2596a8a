#!/bin/sh
# test_gtk_app.sh — the GTK example application (examples/gtk) under Xvfb: it opens the sample, shows
# its transcript, prints the text its window shows, saves a screenshot and quits. Checks the exit
# status, the text (the sample's words, a time prefix), the PNG (signature, size) and that the Khronos
# validation layer reported nothing.
# usage: test_gtk_app.sh APP MODEL AUDIO WORK_DIR
# Exit 77 (CTest: skipped, not passed) when xvfb-run is missing where the test runs (a build tree moved
# to a machine without a display server, as tools/gpu does).
set -u
APP=$1 MODEL=$2 AUDIO=$3 WORK=$4
command -v xvfb-run >/dev/null 2>&1 || { echo "SKIP: xvfb-run not found (Debian: xvfb xauth)"; exit 77; }
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# the cairo renderer: no GL needed (Xvfb has none worth testing); no accessibility bus in CI
GSK_RENDERER=cairo NO_AT_BRIDGE=1 VKASR_VALIDATION=1 xvfb-run -a -s "-screen 0 1024x768x24" \
    "$APP" -m "$MODEL" "$AUDIO" --select 4 --quit-when-done --print-text --screenshot "$WORK/shot.png" \
    >"$WORK/out" 2>"$WORK/err"
status=$?
sed 's/^/  stderr: /' "$WORK/err" | grep -v "session bus" | head -20
echo "text: $(cat "$WORK/out")"
[ "$status" -eq 0 ] || fail "exit status $status"
grep -q "told .* mighty customer" "$WORK/out" || fail "the transcript is not shown"
grep -q '^\[0:0[0-9]\.[0-9][0-9]\]  ' "$WORK/out" || fail "no time prefix at the start of a line"
grep -q "Vulkan validation" "$WORK/err" && fail "Vulkan validation report(s)"
if [ -f "$WORK/shot.png" ]; then
    sig=$(od -An -tx1 -N8 "$WORK/shot.png" | tr -d ' \n')
    [ "$sig" = "89504e470d0a1a0a" ] || fail "the screenshot is not a PNG ($sig)"
    # IHDR width and height (bytes 16-23, big-endian)
    w=$(od -An -tu1 -j16 -N4 "$WORK/shot.png" | awk '{print $1*16777216+$2*65536+$3*256+$4}')
    h=$(od -An -tu1 -j20 -N4 "$WORK/shot.png" | awk '{print $1*16777216+$2*65536+$3*256+$4}')
    { [ "$w" -ge 400 ] && [ "$h" -ge 300 ]; } || fail "screenshot of ${w}x${h}"
    [ "$(wc -c <"$WORK/shot.png")" -gt 10000 ] || fail "the screenshot is almost empty"
else
    fail "no screenshot"
fi
echo "test_gtk_app: $fails failure(s)"
[ "$fails" -eq 0 ]
