#!/bin/sh
# test_serve.sh — `vkasr serve` on loopback ports: the OpenAI Node SDK and curl with each response_format,
# stream=true's server-sent events, subtitles equal to the CLI's, bad requests (each its status, the
# server serving on), `language` on a language-prompt model and one without a prompt, 16 concurrent
# clients whose answers equal the
# offline transcripts in batches of several requests, SIGTERM with requests in flight (exit 0), and
# --devices 0,0 (two workers on lavapipe's one device) answering concurrent clients, both workers busy.
#   test_serve.sh VKASR MODEL DATA_DIR WORK_DIR NPM_DIR
set -u
VKASR=$1 MODEL=$2 DATA=$3 WORK=$4 NPM=$5
HERE=$(cd "$(dirname "$0")" && pwd)
SDK_VERSION=4.95.0
AUDIO=$DATA/audio
rm -rf "$WORK"
mkdir -p "$WORK/tmp"
status=0
ok() { echo "ok   $*"; }
fail() {
    echo "FAIL $*"
    status=1
}
PIDS=""
cleanup() { for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; }
trap cleanup EXIT

# the validation layer on, except in the sanitizer builds (VKASR_TEST_NO_VALIDATION: tests/CMakeLists.txt)
VALIDATION=1
[ -z "${VKASR_TEST_NO_VALIDATION:-}" ] || VALIDATION=0
# start_server NAME ARGS...: starts vkasr serve on a free loopback port; sets PID, PORT, LOG
start_server() {
    LOG=$WORK/$1.log
    shift
    TMPDIR=$WORK/tmp VKASR_VALIDATION=$VALIDATION "$VKASR" serve -m "$MODEL" --port 0 "$@" 2>"$LOG" &
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

# status_of EXPECTED WHAT CURL_ARGS...: the request's HTTP status must be EXPECTED
status_of() {
    want=$1 what=$2
    shift 2
    got=$(curl -s -o "$WORK/body" -w '%{http_code}' --max-time 60 "$@")
    if [ "$got" = "$want" ]; then ok "$what: $got"; else fail "$what: $got, expected $want: $(head -c 300 "$WORK/body")"; fi
}

# Usage: help 0, bad options 2, a missing model 3.
# exit_of EXPECTED ARGS...: vkasr serve ARGS exits EXPECTED
exit_of() {
    want=$1
    shift
    "$VKASR" serve "$@" >"$WORK/usage.out" 2>&1
    got=$?
    [ $got -eq "$want" ] && ok "vkasr serve $*: exit $got" || fail "vkasr serve $*: exit $got, expected $want"
}
exit_of 0 --help
grep -q -- "--batch-wait-ms" "$WORK/usage.out" || fail "serve --help lists --batch-wait-ms"
exit_of 2 -m "$MODEL" --port 70000
exit_of 2 -m "$MODEL" --bogus
exit_of 2 -m "$MODEL" --max-upload 12Q
exit_of 2 -m "$MODEL" --port
exit_of 3 -m "$DATA/no/such/model.gguf" --port 0
exit_of 2 -m "$MODEL" --devices ,0
exit_of 2 -m "$MODEL" --sessions 0
exit_of 2 -m "$MODEL" --sessions 9
exit_of 2 -m "$MODEL" --devices 0,
exit_of 2 -m "$MODEL" -d 0 --devices 0
exit_of 2 -m "$MODEL" --max-lines 3
grep -q "max_lines 3: must be 1 or 2" "$WORK/usage.out" || fail "--max-lines 3: $(cat "$WORK/usage.out")"
exit_of 2 -m "$MODEL" --min-cue-seconds 9
exit_of 2 -m "$MODEL" --warm-up long
exit_of 5 -m "$MODEL" --port 0 --devices 0,99
grep -q "^vkasr: 99: device index 99 out of range" "$WORK/usage.out" || fail "--devices 0,99: the missing device is named"
# One --devices parser (tools/cli/pool.c): serve and transcribe refuse the same lists, exit 2, same words.
# same_refusal WANT ARGS...: both commands exit 2 with the same message, which matches WANT
same_refusal() {
    want=$1
    shift
    "$VKASR" serve -m "$MODEL" --port 0 "$@" >/dev/null 2>"$WORK/dev_serve.err"
    s=$?
    "$VKASR" transcribe -m "$MODEL" "$@" "$WORK/none.wav" >/dev/null 2>"$WORK/dev_transcribe.err"
    t=$?
    if [ $s -eq 2 ] && [ $t -eq 2 ] && grep -q "$want" "$WORK/dev_serve.err" &&
        cmp -s "$WORK/dev_serve.err" "$WORK/dev_transcribe.err"; then
        ok "$*: refused alike by serve and transcribe"
    else
        fail "$*: serve exit $s, transcribe exit $t: $(cat "$WORK/dev_serve.err" "$WORK/dev_transcribe.err")"
    fi
}
for bad in ",0" "0," "0,,1" ""; do
    same_refusal "^vkasr: --devices needs a comma-separated list of devices (0,1 or cuda:0,cuda:1)$" --devices "$bad"
done
same_refusal "^vkasr: --devices and -d both name devices: use one$" -d 0 --devices 0
if ! "$VKASR" devices --help | grep -q "CUDA devices"; then
    same_refusal "^vkasr: --device cuda:1: this vkasr was built without the CUDA backend" --devices 0,cuda:1
fi

# The offline transcripts, `vkasr transcribe` of each file alone: one call for all (without --batch it
# transcribes them one at a time, a JSON line each, in order), and the text format of the two files whose
# text answers are compared.
FILES="$AUDIO/heldout/h00000.wav $AUDIO/heldout/h00100.wav $AUDIO/heldout/h00501.wav $AUDIO/speech_16k_mono.wav
$AUDIO/speech_44k_stereo.flac $AUDIO/speech_44k_stereo.mp3 $AUDIO/silence_1s.wav $AUDIO/heldout/h00300.wav"
# shellcheck disable=SC2086
"$VKASR" transcribe -np --format json -m "$MODEL" $FILES >"$WORK/expect.json" 2>"$WORK/expect.err" || fail "transcribe $FILES"
n=0
for f in $FILES; do
    sed -n "$((n + 1))p" "$WORK/expect.json" >"$WORK/expect$n.json"
    grep -qF "\"file\":\"$f\"" "$WORK/expect$n.json" || fail "transcribe: line $((n + 1)) is not $f's"
    n=$((n + 1))
done
NFILES=$n
for n in 1 7; do
    f=$(echo $FILES | tr ' ' '\n' | sed -n "$((n + 1))p")
    "$VKASR" transcribe -np -m "$MODEL" "$f" >"$WORK/expect$n.txt" 2>>"$WORK/expect.err" || fail "transcribe $f"
done
# The sample twice, 2 s of silence between: two segments, so two deltas when streamed (8.5 s of it each:
# the main server's --max-upload is 1M)
SAMPLE=$HERE/../samples/sample.wav
python3 - "$SAMPLE" "$WORK/twice.wav" <<'EOF_PY'
import sys, wave
with wave.open(sys.argv[1]) as r:
    p = r.getparams()
    a = r.readframes(int(8.5 * p.framerate))
with wave.open(sys.argv[2], "wb") as w:
    w.setparams(p)
    w.writeframes(a + b"\0" * (2 * p.sampwidth * p.nchannels * p.framerate) + a)
EOF_PY
"$VKASR" transcribe -np -m "$MODEL" "$WORK/twice.wav" >"$WORK/twice.txt" 2>"$WORK/twice.err" || fail "transcribe twice.wav"

# same_tokens ANSWER EXPECT: a verbose_json answer has the text and the token ids (its segments') of
# `vkasr transcribe --format json`
same_tokens() {
    node -e '
const fs = require("fs");
const a = JSON.parse(fs.readFileSync(process.argv[1], "utf8")), e = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const ids = [].concat(...a.segments.map((s) => s.tokens));
process.exit(a.text === e.text && JSON.stringify(ids) === JSON.stringify(e.tokens.map((t) => t.id)) ? 0 : 1);' "$1" "$2"
}

# ---- one server with an API key, a small upload limit, a short timeout and a short queue ----
KEY=test-key-0123
VKASR_API_KEY=$KEY start_server main --max-upload 1M --timeout 2 --max-queue 1
URL=http://127.0.0.1:$PORT
AUTH="Authorization: Bearer $KEY"
T=$URL/v1/audio/transcriptions
SPEECH=$AUDIO/heldout/h00100.wav

exit_of 1 -m "$MODEL" --port "$PORT"
grep -q "cannot listen on 127.0.0.1 port $PORT" "$WORK/usage.out" || fail "a port in use: $(cat "$WORK/usage.out")"
status_of 200 "GET /health" "$URL/health"
status_of 200 "GET /" "$URL/"
status_of 200 "GET /v1/models" -H "$AUTH" "$URL/v1/models"
for fmt in json text srt vtt verbose_json; do
    status_of 200 "curl response_format=$fmt" -H "$AUTH" -F file=@"$SPEECH" -F model=whisper-1 -F response_format=$fmt "$T"
    cp "$WORK/body" "$WORK/curl.$fmt"
done
cmp -s "$WORK/curl.text" "$WORK/expect1.txt" && ok "curl text equals vkasr transcribe" || fail "curl text differs from vkasr transcribe"
grep -q '^{"text":' "$WORK/curl.json" && ok "curl json" || fail "curl json: $(cat "$WORK/curl.json")"
head -1 "$WORK/curl.vtt" | grep -q '^WEBVTT$' && ok "curl vtt" || fail "curl vtt"
head -1 "$WORK/curl.srt" | grep -q '^1$' && ok "curl srt" || fail "curl srt"
grep -q '"segments":\[{"id":0' "$WORK/curl.verbose_json" && ok "curl verbose_json" || fail "curl verbose_json"

# The OpenAI Node SDK, installed once into NPM_DIR at a pinned version.
if [ ! -f "$NPM/node_modules/openai/package.json" ] ||
    ! grep -q "\"version\": \"$SDK_VERSION\"" "$NPM/node_modules/openai/package.json"; then
    mkdir -p "$NPM"
    npm install --prefix "$NPM" --no-audit --no-fund --no-save --loglevel=error "openai@$SDK_VERSION" >"$WORK/npm.log" 2>&1 ||
        { cat "$WORK/npm.log"; fail "npm install openai@$SDK_VERSION"; }
fi
NODE_PATH=$NPM/node_modules node "$HERE/test_serve_openai.cjs" "$PORT" "$KEY" "$SPEECH" "$WORK/expect1.txt" \
    "$AUDIO/not_audio.wav" "$WORK/twice.wav" "$WORK/twice.txt" || fail "the OpenAI SDK test"

# stream=true, the raw events (curl -N): `data: {json}` lines, each followed by a blank line; a
# transcript.text.delta per segment (two here), then transcript.text.done; the deltas make the done
# text, which is the offline transcript (json here, text through the SDK: the same events).
for fmt in json; do
    status_of 200 "stream=true ($fmt)" -N -D "$WORK/headers" -H "$AUTH" -F file=@"$WORK/twice.wav" -F model=whisper-1 \
        -F stream=true -F response_format=$fmt "$T"
    grep -qi '^content-type: text/event-stream' "$WORK/headers" || fail "stream=true: content type $(cat "$WORK/headers")"
    node -e '
const fs = require("fs");
const body = fs.readFileSync(process.argv[1], "utf8"), want = fs.readFileSync(process.argv[2], "utf8").trim();
const blocks = body.split("\n\n");
const fail = (m) => { console.log("FAIL stream=true: " + m + ": " + JSON.stringify(body)); process.exit(1); };
if (blocks.pop() !== "") fail("not ended by a blank line");
const ev = blocks.map((b) => { if (!/^data: [^\n]*$/.test(b)) fail("not one data line: " + b); return JSON.parse(b.slice(6)); });
const done = ev.pop(), deltas = ev.map((e) => e.delta);
if (ev.length < 2 || !ev.every((e) => e.type === "transcript.text.delta" && Object.keys(e).join() === "type,delta"))
  fail("expected two deltas or more");
if (done.type !== "transcript.text.done" || Object.keys(done).join() !== "type,text") fail("the last event");
if (deltas.join("") !== done.text || done.text !== want) fail("the texts");' "$WORK/body" "$WORK/twice.txt" &&
        ok "stream=true ($fmt): deltas, then done; the offline text" || fail "stream=true ($fmt)"
done
# a client that leaves mid-stream: its transcription stops, the server serves on
curl -s -N --max-time 0.3 -o /dev/null -H "$AUTH" -F file=@"$WORK/twice.wav" -F model=whisper-1 -F stream=true "$T"
status_of 200 "serving after a streaming client left" -H "$AUTH" -F file=@"$WORK/twice.wav" -F model=whisper-1 \
    -F stream=true "$T"
grep -q '"type":"transcript.text.done"' "$WORK/body" || fail "the stream after a client left: $(cat "$WORK/body")"
status_of 400 "stream=true with srt" -H "$AUTH" -F file=@"$SPEECH" -F model=whisper-1 -F stream=true -F response_format=srt "$T"
grep -q '"param":"stream"' "$WORK/body" || fail "stream=true with srt: $(cat "$WORK/body")"
status_of 400 "stream=maybe" -H "$AUTH" -F file=@"$SPEECH" -F model=whisper-1 -F stream=maybe "$T"
status_of 200 "stream=false" -H "$AUTH" -F file=@"$SPEECH" -F model=whisper-1 -F stream=false -F response_format=text "$T"
cmp -s "$WORK/body" "$WORK/expect1.txt" || fail "stream=false: not the plain answer"

# Subtitles: the sample's SRT and WebVTT are the CLI's, with the default limits and with a request's.
"$VKASR" transcribe -np -m "$MODEL" --format srt "$SAMPLE" >"$WORK/sample.srt" 2>/dev/null
status_of 200 "srt of the sample" -H "$AUTH" -F file=@"$SAMPLE" -F model=whisper-1 -F response_format=srt "$T"
cmp -s "$WORK/body" "$WORK/sample.srt" && [ "$(grep -c -- ' --> ' "$WORK/body")" -ge 3 ] &&
    ok "srt of the sample: the CLI's cues" || fail "srt of the sample differs from the CLI's"
LIMITS="--max-line-chars 30 --max-lines 1 --max-cue-seconds 4 --min-cue-seconds 0.5 --cue-pause 0.3"
# shellcheck disable=SC2086
"$VKASR" transcribe -np -m "$MODEL" -osrt -ovtt -of "$WORK/sample_limits" $LIMITS "$SAMPLE" >/dev/null 2>&1
status_of 200 "vtt of the sample, limits in the request" -H "$AUTH" -F file=@"$SAMPLE" -F model=whisper-1 \
    -F response_format=vtt -F max_line_chars=30 -F max_lines=1 -F max_cue_seconds=4 -F min_cue_seconds=0.5 \
    -F cue_pause=0.3 "$T"
cmp -s "$WORK/body" "$WORK/sample_limits.vtt" && ok "vtt with the request's limits: the CLI's with its options" ||
    fail "vtt with limits differs from the CLI's"
status_of 400 "max_lines=3" -H "$AUTH" -F file=@"$SAMPLE" -F model=whisper-1 -F response_format=srt -F max_lines=3 "$T"
grep -q 'max_lines 3: must be 1 or 2","type":"invalid_request_error","param":"max_lines"' "$WORK/body" ||
    fail "max_lines=3: $(cat "$WORK/body")"
status_of 400 "max_cue_seconds=x" -H "$AUTH" -F file=@"$SAMPLE" -F model=whisper-1 -F response_format=srt \
    -F max_cue_seconds=x "$T"

# Bad requests: each gets its status.
status_of 400 "not audio" -H "$AUTH" -F file=@"$AUDIO/not_audio.wav" -F model=whisper-1 "$T"
grep -q '"error":{"message":.*"type":"invalid_request_error","param":"file"' "$WORK/body" && ok "OpenAI's error shape" ||
    fail "error shape: $(cat "$WORK/body")"
status_of 400 "an empty file" -H "$AUTH" -F file=@"$AUDIO/empty.wav" -F model=whisper-1 "$T"
: >"$WORK/zero.wav"
status_of 400 "a zero-byte file" -H "$AUTH" -F file=@"$WORK/zero.wav" -F model=whisper-1 "$T"
status_of 400 "no file" -H "$AUTH" -F model=whisper-1 "$T"
status_of 400 "no model" -H "$AUTH" -F file=@"$SPEECH" "$T"
status_of 400 "an unknown model" -H "$AUTH" -F file=@"$SPEECH" -F model=nope "$T"
status_of 400 "a bad response_format" -H "$AUTH" -F file=@"$SPEECH" -F model=whisper-1 -F response_format=xml "$T"
status_of 400 "a bad temperature" -H "$AUTH" -F file=@"$SPEECH" -F model=whisper-1 -F temperature=7 "$T"
# a model without a language prompt takes any language as a hint it cannot follow (OpenAI's clients send
# one; parakeet-tdt-0.6b-v3 has 25 languages and no prompt): the same text as without it
status_of 200 "a language for a model without a prompt" -H "$AUTH" -F file=@"$SPEECH" -F model=whisper-1 \
    -F language=de -F response_format=text "$T"
cmp -s "$WORK/body" "$WORK/expect1.txt" && ok "the language hint leaves the text as it was" ||
    fail "language de on a model without a prompt: $(head -c 200 "$WORK/body")"
status_of 400 "malformed multipart" -H "$AUTH" -H "Content-Type: multipart/form-data; boundary=XyZ" \
    --data-binary "--XyZ
Content-Disposition: form-data; name=\"file\"; filename=\"a.wav\"

RIFF-not-closed" "$T"
status_of 400 "not multipart" -H "$AUTH" -H "Content-Type: application/json" --data '{"model":"whisper-1"}' "$T"
head -c 1200000 /dev/zero >"$WORK/big.wav"
status_of 413 "an upload over --max-upload" -H "$AUTH" -F file=@"$WORK/big.wav" -F model=whisper-1 "$T"
status_of 405 "GET on the transcription endpoint" -H "$AUTH" "$T"
status_of 405 "POST /health" -X POST "$URL/health"
status_of 404 "an unknown path" -H "$AUTH" "$URL/v1/chat/completions"
status_of 401 "no key" -F file=@"$SPEECH" -F model=whisper-1 "$T"
status_of 401 "a wrong key" -H "Authorization: Bearer wrong" -F file=@"$SPEECH" -F model=whisper-1 "$T"
status_of 401 "GET /v1/models without the key" "$URL/v1/models"
# A client that sends half its body and stops: dropped after --timeout, its slot freed.
node -e '
const s = require("net").connect(+process.argv[1], "127.0.0.1", () => {
  s.write("POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + process.argv[2] +
          "\r\nContent-Type: multipart/form-data; boundary=stalledboundary\r\nContent-Length: 100000\r\n\r\n--stalledboundary\r\n" +
          "Content-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF");
});
s.on("close", () => process.exit(0));
setTimeout(() => process.exit(1), 20000);' "$PORT" "$KEY" && ok "a stalled body: the server closed the connection" ||
    fail "a stalled body: the connection stayed open"
grep -q "POST /v1/audio/transcriptions dropped after .* (timed out)" "$LOG" && ok "a stalled body: logged as timed out" ||
    fail "a stalled body: no log line"
[ -z "$(ls "$WORK/tmp")" ] && ok "nothing written to TMPDIR (uploads stay in memory)" ||
    fail "files in TMPDIR: $(ls "$WORK/tmp")"
status_of 200 "still serving after the bad requests" -H "$AUTH" -F file=@"$SPEECH" -F model=whisper-1 -F response_format=text "$T"
cmp -s "$WORK/body" "$WORK/expect1.txt" || fail "the answer after the bad requests differs"
# A full queue: 503 for what does not fit, the others answered.
CPIDS=""
for k in 0 1 2 3 4 5; do
    curl -s -o "$WORK/q$k.txt" -w '%{http_code}' --max-time 120 -H "$AUTH" -F file=@"$AUDIO/heldout/h00300.wav" \
        -F model=whisper-1 -F response_format=text "$T" >"$WORK/q$k.code" &
    CPIDS="$CPIDS $!"
done
for p in $CPIDS; do wait "$p"; done
n503=0
for k in 0 1 2 3 4 5; do
    case $(cat "$WORK/q$k.code") in
    503) n503=$((n503 + 1)) ;;
    200) cmp -s "$WORK/q$k.txt" "$WORK/expect7.txt" || fail "queue test: answer $k differs from vkasr transcribe" ;;
    *) fail "queue test: request $k: HTTP $(cat "$WORK/q$k.code")" ;;
    esac
done
[ $n503 -gt 0 ] && [ $n503 -lt 6 ] && ok "--max-queue 1: $n503 of 6 answered 503, the others 200" ||
    fail "--max-queue 1: $n503 of 6 answered 503"
kill -TERM "$PID"
wait "$PID" && ok "main server: exit 0 on SIGTERM" || fail "main server: exit status $? on SIGTERM"
grep -q "Vulkan validation" "$LOG" && fail "Vulkan validation reports in $LOG"

# ---- language: the language-prompt fixture (Nemotron 3.5's prompt) answers in the language asked, as
# `vkasr transcribe --language` does; an ISO-639-1 code maps to the model's one locale of it ----
PROMPT=$DATA/streaming/stream_prompt.nemo CLIP=$AUDIO/parity/short_okay.wav
for l in de-DE fr-FR auto; do
    "$VKASR" transcribe -np -m "$PROMPT" --language "$l" --format json "$CLIP" 2>>"$WORK/expect.err" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["text"])' >"$WORK/lang_$l.txt" || fail "transcribe --language $l"
done
cmp -s "$WORK/lang_de-DE.txt" "$WORK/lang_fr-FR.txt" && fail "the fixture gives one text for de-DE and fr-FR"
MAIN_MODEL=$MODEL MODEL=$PROMPT
start_server prompt
MODEL=$MAIN_MODEL
# lang_is LANGUAGE EXPECTED: the json answer's text for a request in LANGUAGE ("": none) is EXPECTED's
lang_is() {
    set -- "$1" "$2" -F file=@"$CLIP" -F model=whisper-1
    [ -z "$1" ] || set -- "$@" -F language="$1"
    lang=$1 lang_want=$2
    shift 2
    status_of 200 "language '$lang'" "$@" "http://127.0.0.1:$PORT/v1/audio/transcriptions"
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["text"])' "$WORK/body" >"$WORK/lang.txt"
    cmp -s "$WORK/lang.txt" "$WORK/lang_$lang_want.txt" && ok "language '$lang': the text of --language $lang_want" ||
        fail "language '$lang': $(cat "$WORK/lang.txt"), expected $(cat "$WORK/lang_$lang_want.txt")"
}
lang_is fr fr-FR
lang_is DE-de de-DE
lang_is de de-DE
lang_is "" auto
status_of 400 "a language the model lacks" -F file=@"$CLIP" -F model=whisper-1 -F language=es \
    "http://127.0.0.1:$PORT/v1/audio/transcriptions"
grep -q "unknown language .*es.*the model's languages: en-US, en, de-DE, de, fr-FR, auto" "$WORK/body" &&
    ok "the refusal lists the model's languages" || fail "language es: $(cat "$WORK/body")"
kill -TERM "$PID"
wait "$PID" || fail "prompt server: exit status $? on SIGTERM"

# ---- 16 concurrent clients, 2 files each: every answer is the offline transcript; one long input
# (over --solo-seconds) at the same time runs alone ----
# shellcheck disable=SC2086
start_server batch --batch-wait-ms 20 --solo-seconds 5 $LIMITS
grep -q "^vkasr serve: worker 0 warmed up in [0-9]* ms: 0.5 s alone (device default)$" "$LOG" &&
    ok "on the host's CPU the warm-up is half a second alone" || fail "the default warm-up: $(grep warm "$LOG")"
T=http://127.0.0.1:$PORT/v1/audio/transcriptions
status_of 200 "srt, the server's subtitle options" -F file=@"$SAMPLE" -F model=whisper-1 -F response_format=srt "$T"
cmp -s "$WORK/body" "$WORK/sample_limits.srt" && ok "the server's subtitle options: the CLI's cues" ||
    fail "the server's subtitle options: cues differ from the CLI's"
T=http://127.0.0.1:$PORT/v1/audio/transcriptions
c=0
CPIDS=""
while [ $c -lt 16 ]; do
    (
        for k in 0 1; do
            i=$(((c * 2 + k) % (NFILES - 1)))
            f=$(echo $FILES | tr ' ' '\n' | sed -n "$((i + 1))p")
            code=$(curl -s -o "$WORK/c$c.$k.json" -w '%{http_code}' --max-time 120 -F file=@"$f" -F model=whisper-1 \
                -F response_format=verbose_json "$T")
            if [ "$code" != 200 ]; then echo "FAIL client $c request $k: HTTP $code"; exit 1; fi
            same_tokens "$WORK/c$c.$k.json" "$WORK/expect$i.json" ||
                { echo "FAIL client $c: $f: not the tokens of vkasr transcribe"; exit 1; }
        done
    ) >"$WORK/client$c.out" 2>&1 &
    CPIDS="$CPIDS $!"
    c=$((c + 1))
done
curl -s -o "$WORK/long.json" --max-time 120 -F file=@"$AUDIO/heldout/h00300.wav" -F model=whisper-1 \
    -F response_format=verbose_json "$T" &
CPIDS="$CPIDS $!"
for p in $CPIDS; do wait "$p"; done
same_tokens "$WORK/long.json" "$WORK/expect7.json" && ok "the long input: the tokens of vkasr transcribe" ||
    fail "the long input: $(head -c 300 "$WORK/long.json")"
grep -q "^vkasr serve: turn of 1 request, 7.20 s audio" "$LOG" && ok "the long input ran alone" ||
    fail "the long input did not run alone"
bad=$(cat "$WORK"/client*.out | grep -c FAIL)
[ "$bad" -eq 0 ] && ok "16 clients x 2 requests: every answer has the tokens of vkasr transcribe" ||
    fail "concurrent clients: $(cat "$WORK"/client*.out)"
biggest=$(sed -n 's/^vkasr serve: turn of \([0-9]*\) requests.*/\1/p' "$LOG" | sort -n | tail -1)
[ "${biggest:-1}" -gt 1 ] && ok "batches of several requests (largest $biggest)" || fail "no batch of more than one request"

# ---- SIGTERM with requests in flight: they complete, exit 0 ----
LONG=$AUDIO/heldout/h00300.wav
CPIDS=""
for k in 0 1 2; do
    curl -s -o "$WORK/term$k.txt" -w '%{http_code}' --max-time 120 -F file=@"$LONG" -F model=whisper-1 \
        -F response_format=text "$T" >"$WORK/term$k.code" &
    CPIDS="$CPIDS $!"
done
sleep 0.5 # the uploads are in (loopback); their transcription takes longer
kill -TERM "$PID"
wait "$PID"
rc=$?
for p in $CPIDS; do wait "$p"; done
[ $rc -eq 0 ] && ok "SIGTERM with requests in flight: exit 0" || fail "SIGTERM: exit status $rc"
for k in 0 1 2; do
    [ "$(cat "$WORK/term$k.code")" = 200 ] && cmp -s "$WORK/term$k.txt" "$WORK/expect7.txt" &&
        ok "in-flight request $k answered" || fail "in-flight request $k: HTTP $(cat "$WORK/term$k.code")"
done
grep -q "Vulkan validation" "$LOG" && fail "Vulkan validation reports in $LOG"

# ---- --devices 0,0: two workers on one device, turns of at most two requests, so that both serve (a free
# worker gathers arriving requests while the other runs a turn); SIGTERM with requests in flight drains
# both ----
start_server devices --devices 0,0 --batch-wait-ms 0 --max-batch 2
T=http://127.0.0.1:$PORT/v1/audio/transcriptions
CPIDS=""
for k in 0 1 2 3 4 5 6 7; do
    i=$((k % (NFILES - 1)))
    f=$(echo $FILES | tr ' ' '\n' | sed -n "$((i + 1))p")
    curl -s -o "$WORK/d$k.json" -w '%{http_code}' --max-time 120 -F file=@"$f" -F model=whisper-1 \
        -F response_format=verbose_json "$T" >"$WORK/d$k.code" &
    CPIDS="$CPIDS $!"
done
for p in $CPIDS; do wait "$p"; done
nok=0
for k in 0 1 2 3 4 5 6 7; do
    i=$((k % (NFILES - 1)))
    [ "$(cat "$WORK/d$k.code")" = 200 ] && same_tokens "$WORK/d$k.json" "$WORK/expect$i.json" && nok=$((nok + 1))
done
[ $nok -eq 8 ] && ok "--devices 0,0: 8 concurrent answers with the tokens of vkasr transcribe" ||
    fail "--devices 0,0: $nok of 8 answers right"
for w in 0 1; do
    grep -q "^vkasr serve: POST /v1/audio/transcriptions 200 .* device 0 worker $w$" "$LOG" &&
        ok "--devices 0,0: worker $w answered" || fail "--devices 0,0: no answer from worker $w"
done
CPIDS=""
for k in 0 1; do
    curl -s -o "$WORK/dterm$k.txt" -w '%{http_code}' --max-time 120 -F file=@"$LONG" -F model=whisper-1 \
        -F response_format=text "$T" >"$WORK/dterm$k.code" &
    CPIDS="$CPIDS $!"
done
sleep 0.5 # the uploads are in (loopback); their transcription takes longer
kill -TERM "$PID"
wait "$PID"
rc=$?
for p in $CPIDS; do wait "$p"; done
[ $rc -eq 0 ] && ok "--devices 0,0: exit 0 on SIGTERM" || fail "--devices 0,0: exit status $rc on SIGTERM"
for k in 0 1; do
    [ "$(cat "$WORK/dterm$k.code")" = 200 ] && cmp -s "$WORK/dterm$k.txt" "$WORK/expect7.txt" &&
        ok "--devices 0,0: in-flight request $k answered" || fail "--devices 0,0: in-flight request $k: HTTP $(cat "$WORK/dterm$k.code")"
done
grep -q "Vulkan validation" "$LOG" && fail "Vulkan validation reports in $LOG"

# ---- --warm-up batches (a GPU's default): batches of silence shaped like loaded turns before the server
# is ready; the answers are still those of vkasr transcribe ----
start_server warm -d cpu --warm-up batches --max-batch 2
grep -q "^vkasr serve: worker 0 warmed up in [0-9]* ms: 0.5 s alone, then batches of 60 s of audio (device cpu)$" \
    "$LOG" && ok "--warm-up batches: silence in batches of at most --max-batch inputs before ready" ||
    fail "--warm-up batches: $(cat "$LOG")"
"$VKASR" transcribe -np -d cpu -m "$MODEL" "$SAMPLE" >"$WORK/warm_expect.txt" 2>>"$WORK/expect.err" ||
    fail "transcribe -d cpu $SAMPLE"
status_of 200 "--warm-up batches: a request" -F file=@"$SAMPLE" -F model=whisper-1 -F response_format=text \
    "http://127.0.0.1:$PORT/v1/audio/transcriptions"
cmp -s "$WORK/body" "$WORK/warm_expect.txt" && ok "--warm-up batches: the answer is vkasr transcribe's" ||
    fail "--warm-up batches: the answer differs: $(head -c 200 "$WORK/body")"
kill -TERM "$PID"
wait "$PID" || fail "warm server: exit status $? on SIGTERM"
[ $status -eq 0 ] && echo "PASS test_serve" || { echo "--- batch server log:"; tail -20 "$LOG"; }
exit $status
