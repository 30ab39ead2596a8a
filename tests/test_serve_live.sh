#!/bin/sh
# test_serve_live.sh — the live side of `vkasr serve` on loopback ports: the Realtime WebSocket through the
# official openai SDK's OpenAIRealtimeWS (with ws), 16 sessions at once, bad input, limits, SIGTERM ending a
# session with its final text, a language-prompt model's session language, and the page at / in Debian's chromium driven by puppeteer-core (skipped,
# said so, when chromium is missing). The npm packages are installed once, at pinned versions, into NPM_DIR
# (one of its own: an npm install there removes the packages it did not install).
#   test_serve_live.sh VKASR MODEL DATA_DIR WORK_DIR NPM_DIR
set -u
VKASR=$1 MODEL=$2 DATA=$3 WORK=$4 NPM=$5
HERE=$(cd "$(dirname "$0")" && pwd)
SDK_VERSION=4.95.0 WS_VERSION=8.18.3 PUPPETEER_VERSION=24.43.1
AUDIO=$DATA/audio
rm -rf "$WORK"
mkdir -p "$WORK/expect"
status=0
ok() { echo "ok   $*"; }
fail() {
    echo "FAIL $*"
    status=1
}
PIDS=""
cleanup() { for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; }
trap cleanup EXIT
VALIDATION=1
[ -z "${VKASR_TEST_NO_VALIDATION:-}" ] || VALIDATION=0

# start_server NAME ARGS...: sets PID, PORT, LOG
start_server() {
    LOG=$WORK/$1.log
    shift
    VKASR_VALIDATION=$VALIDATION "$VKASR" serve -m "$MODEL" --port 0 "$@" 2>"$LOG" &
    PID=$!
    PIDS="$PIDS $PID"
    i=0
    while ! grep -q "^vkasr serve: ready" "$LOG"; do
        i=$((i + 1))
        if [ $i -gt 1200 ] || ! kill -0 "$PID" 2>/dev/null; then
            cat "$LOG"
            echo "FAIL the server did not start"
            exit 1
        fi
        sleep 0.1
    done
    PORT=$(sed -n 's|^vkasr serve: listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$LOG")
}

# the npm packages, at pinned versions (node_modules/NAME/package.json names the version installed)
need=""
for p in openai@$SDK_VERSION ws@$WS_VERSION puppeteer-core@$PUPPETEER_VERSION; do
    grep -q "\"version\": \"${p##*@}\"" "$NPM/node_modules/${p%@*}/package.json" 2>/dev/null || need="$need $p"
done
if [ -n "$need" ]; then
    mkdir -p "$NPM"
    # shellcheck disable=SC2086 # one word per package
    npm install --prefix "$NPM" --no-audit --no-fund --no-save --loglevel=error openai@$SDK_VERSION ws@$WS_VERSION \
        puppeteer-core@$PUPPETEER_VERSION >"$WORK/npm.log" 2>&1 || { cat "$WORK/npm.log"; fail "npm install$need"; exit 1; }
fi
export NODE_PATH="$NPM/node_modules"

# the clips (16 kHz mono PCM16) and their offline transcripts, `vkasr transcribe` of each
CLIPS="$AUDIO/heldout/h00100.wav $AUDIO/heldout/h00000.wav $AUDIO/heldout/h00300.wav $AUDIO/heldout/h00501.wav
$AUDIO/speech_16k_mono.wav"
# shellcheck disable=SC2086 # CLIPS is a list
"$VKASR" transcribe -np --format json -m "$MODEL" $CLIPS >"$WORK/expect.jsonl" 2>"$WORK/expect.err" || fail "transcribe the clips"
node -e '
const fs = require("fs");
fs.readFileSync(process.argv[1], "utf8").trim().split("\n").forEach((l, i) => fs.writeFileSync(`${process.argv[2]}/${i}.txt`, JSON.parse(l).text + "\n"));' \
    "$WORK/expect.jsonl" "$WORK/expect"

# usage
"$VKASR" serve --help >"$WORK/help.out" 2>&1
for o in --max-streams --max-streams-per-key --stream-max-seconds --stream-idle --ws-max-message --cors-origin --no-ui; do
    grep -q -- "$o" "$WORK/help.out" || fail "serve --help lists $o"
done
"$VKASR" serve -m "$MODEL" --max-streams 0 >/dev/null 2>&1
[ $? -eq 2 ] && ok "--max-streams 0: exit 2" || fail "--max-streams 0 is not refused"

# ---- one server with a key and a 1 MiB message limit ----
KEY=live-key-42
start_server main --api-key "$KEY" --ws-max-message 1M
# shellcheck disable=SC2086 # CLIPS is a list
node "$HERE/test_serve_realtime.cjs" sdk "$PORT" "$KEY" "$WORK/expect" $CLIPS || fail "the openai SDK's Realtime session"
# shellcheck disable=SC2086
node "$HERE/test_serve_realtime.cjs" many "$PORT" "$KEY" "$WORK/expect" $CLIPS || fail "16 sessions at once"
# shellcheck disable=SC2086
node "$HERE/test_serve_realtime.cjs" bad "$PORT" "$KEY" "$WORK/expect" $CLIPS || fail "bad input"
grep -q "realtime session [0-9]* (key): .*: closed$" "$LOG" ||
    fail "no log line for the sessions"
code=$(curl -s -o "$WORK/body" -w '%{http_code}' --max-time 10 -H "Authorization: Bearer $KEY" \
    -F file=@"$AUDIO/heldout/h00100.wav" -F model=whisper-1 -F response_format=text "http://127.0.0.1:$PORT/v1/audio/transcriptions")
[ "$code" = 200 ] && cmp -s "$WORK/body" "$WORK/expect/0.txt" && ok "still serving files after the bad sessions" ||
    fail "a file after the bad sessions: HTTP $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:$PORT/v1/realtime")
[ "$code" = 426 ] && ok "GET /v1/realtime without an upgrade: 426" || fail "GET /v1/realtime without an upgrade: HTTP $code"
curl -s --max-time 10 "http://127.0.0.1:$PORT/" | grep -q "AudioWorklet" && ok "GET /: the page" || fail "GET /: no page"
curl -s --max-time 10 "http://127.0.0.1:$PORT/status" | grep -q '"streams":{"active":' && ok "GET /status" || fail "GET /status"
curl -s -D "$WORK/headers" -o /dev/null --max-time 10 "http://127.0.0.1:$PORT/health"
grep -qi "^Access-Control-Allow-Origin" "$WORK/headers" && fail "CORS headers without --cors-origin" || ok "no CORS without --cors-origin"

# SIGTERM with a session streaming: it gets the rest of its words, completed, then close 1001
node "$HERE/test_serve_realtime.cjs" term "$PORT" "$KEY" "$WORK/expect" "$AUDIO/heldout/h00100.wav" "$WORK/term.json" &
CP=$!
i=0
while [ ! -f "$WORK/term.json.sent" ] && [ $i -lt 300 ]; do
    sleep 0.1
    i=$((i + 1))
done
sleep 0.2
kill -TERM "$PID"
wait "$PID"
rc=$?
wait "$CP"
[ $rc -eq 0 ] && ok "SIGTERM with a session streaming: exit 0" || fail "SIGTERM: exit status $rc"
node -e '
const fs = require("fs");
const j = JSON.parse(fs.readFileSync(process.argv[1], "utf8")), want = fs.readFileSync(process.argv[2], "utf8").trim();
const done = j.events.find((e) => e.type === "conversation.item.input_audio_transcription.completed");
const ok = j.close && j.close.code === 1001 && done && done.transcript === want;
console.log(`${ok ? "ok  " : "FAIL"} SIGTERM: completed ${JSON.stringify(done && done.transcript)}, close ${JSON.stringify(j.close)}`);
process.exit(ok ? 0 : 1);' "$WORK/term.json" "$WORK/expect/0.txt" || status=1
grep -q "Vulkan validation" "$LOG" && fail "Vulkan validation reports in $LOG"

# ---- limits: --max-streams 2, --stream-idle 2, --stream-max-seconds 4, the key and the Origin rule; CORS for one origin; --no-ui ----
start_server limits --api-key "$KEY" --max-streams 2 --stream-idle 2 --stream-max-seconds 4 --cors-origin https://app.example --no-ui
curl -s --max-time 10 "http://127.0.0.1:$PORT/" | grep -q "^vkasr serve: speech recognition" && ok "--no-ui: the plain-text /" ||
    fail "--no-ui: / is not the plain-text page"
node "$HERE/test_serve_realtime.cjs" limits "$PORT" "$KEY" "$WORK/expect" "$AUDIO/heldout/h00100.wav" || fail "limits"
curl -s -D "$WORK/headers" -o /dev/null --max-time 10 -X OPTIONS "http://127.0.0.1:$PORT/v1/audio/transcriptions"
grep -qi "^Access-Control-Allow-Origin: https://app.example" "$WORK/headers" && ok "--cors-origin: the preflight" ||
    fail "--cors-origin: $(cat "$WORK/headers")"
kill -TERM "$PID"
wait "$PID" || fail "limits server: exit status $? on SIGTERM"

# ---- a language-prompt model (the streaming fixture with Nemotron 3.5's prompt): the session's language
# steers the stream as `vkasr transcribe --language` does ----
PROMPT=$DATA/streaming/stream_prompt.nemo CLIP=$AUDIO/parity/short_okay.wav
"$VKASR" transcribe -np -m "$PROMPT" --language fr-FR --format json "$CLIP" 2>>"$WORK/expect.err" |
    node -e 'let s = ""; process.stdin.on("data", (d) => s += d).on("end", () => console.log(JSON.parse(s).text))' \
        >"$WORK/expect/fr.txt" || fail "transcribe --language fr-FR"
MAIN_MODEL=$MODEL MODEL=$PROMPT
start_server prompt
MODEL=$MAIN_MODEL
node "$HERE/test_serve_realtime.cjs" lang "$PORT" "" "$WORK/expect" "$CLIP" || fail "the session's language"
kill -TERM "$PID"
wait "$PID" || fail "prompt server: exit status $? on SIGTERM"

# ---- without a key: --max-streams-per-key counts per client address; then the page in chromium: the
# microphone (a fake capture device) and an upload. (The browser is not in the sanitizer builds, which set
# VKASR_TEST_NO_VALIDATION: the server paths the page takes are the ones above, and the normal build
# runs it.) ----
start_server ui --max-streams-per-key 1
node "$HERE/test_serve_realtime.cjs" perkey "$PORT" "" "$WORK/expect" || fail "--max-streams-per-key"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -n "${VKASR_TEST_NO_VALIDATION:-}" ]; then
    echo "skip the browser test in the sanitizer build"
elif [ -z "$CHROMIUM" ]; then
    echo "skip the browser test: no chromium (Debian: chromium; scripts/setup.sh --test installs it)"
else
    # the clip, then 3 s of silence: the capture loops it, each pass a turn of its own. (Under load chromium
    # drops captured audio, in the clip and in the pause: with 1.5 s a pass's pause fell under the 1 s that
    # ends a turn.)
    node -e '
const fs = require("fs");
const b = fs.readFileSync(process.argv[1]), rate = b.readUInt32LE(24), data = b.subarray(44);
const pad = Buffer.alloc(rate * 3 * 2), h = Buffer.from(b.subarray(0, 44));
h.writeUInt32LE(36 + data.length + pad.length, 4);
h.writeUInt32LE(data.length + pad.length, 40);
fs.writeFileSync(process.argv[2], Buffer.concat([h, data, pad]));' "$AUDIO/heldout/h00100.wav" "$WORK/clip.wav"
    "$VKASR" transcribe -np --format srt -m "$MODEL" "$AUDIO/heldout/h00100.wav" >"$WORK/expect.srt" || fail "transcribe --format srt"
    timeout 120 node "$HERE/test_serve_browser.cjs" "$CHROMIUM" "$PORT" "$WORK/clip.wav" "$WORK/expect/0.txt" \
        "$AUDIO/heldout/h00100.wav" "$WORK/expect.srt" || fail "the page in chromium"
fi
kill -TERM "$PID"
wait "$PID" || fail "ui server: exit status $? on SIGTERM"
grep -q "Vulkan validation" "$LOG" && fail "Vulkan validation reports in $LOG"
[ $status -eq 0 ] && echo "PASS test_serve_live"
exit $status
