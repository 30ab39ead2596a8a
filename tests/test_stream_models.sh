#!/bin/sh
# test_stream_models.sh — the language-prompt and end-of-utterance models through the CLI: refusals
# (exit code and the field or language named, nothing written), the transcript's language and events
# in the JSON output, and live --json's end_of_utterance and language.
# usage: test_stream_models.sh VKASR DATA_DIR WORK_DIR
set -u
VKASR=$1 DATA=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK/nemo" || exit 1
S=$DATA/streaming CLIP=$DATA/audio/parity/short_okay.wav
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect CODE PATTERN CMD...: the exit code, stderr holding PATTERN (grep -F), nothing on stdout
expect() {
    want=$1 pat=$2; shift 2
    "$@" >"$WORK/out" 2>"$WORK/err"; got=$?
    [ "$got" -eq "$want" ] || fail "exit $got (want $want): $*"
    [ -z "$pat" ] || grep -qF -- "$pat" "$WORK/err" || { fail "stderr lacks '$pat': $*"; sed 's/^/  stderr: /' "$WORK/err" | head -3; }
    [ "$want" -eq 0 ] || [ ! -s "$WORK/out" ] || fail "output on stdout: $*"
}

expect 2 "unknown language \"xx-XX\"; the model's languages: en-US, en, de-DE, de, fr-FR, auto" \
    "$VKASR" transcribe -np -m "$S/stream_prompt.nemo" --language xx-XX "$CLIP"
expect 2 "language \"de\": the model has no language prompt" \
    "$VKASR" transcribe -np -m "$S/stream_rnnt.nemo" --language de "$CLIP"
expect 2 "unknown language \"it\"" "$VKASR" transcribe -np -m "$S/stream_prompt.nemo" --language it --batch 2 "$CLIP"

# the prompt model's .nemo with a faulty configuration: num_prompts the weights contradict, no map
(cd "$WORK/nemo" && tar -xf "$S/stream_prompt.nemo") || exit 1
for k in size nomap; do
    cp "$S/config_prompt_$k.yaml" "$WORK/nemo/model_config.yaml" || exit 1
    (cd "$WORK/nemo" && tar -cf "../$k.nemo" ./model_config.yaml ./model_weights.ckpt ./*tokenizer.model) || exit 1
done
expect 3 "tensor 'prompt_projector.linear_1.weight' has shape [48, 72], expected [48, 76]" \
    "$VKASR" transcribe -np -m "$WORK/size.nemo" "$CLIP"
expect 3 "'model_defaults.prompt_dictionary' is missing or empty" "$VKASR" transcribe -np -m "$WORK/nomap.nemo" "$CLIP"
expect 3 "'model_defaults.prompt_dictionary' is missing or empty" \
    "$VKASR" convert "$WORK/nomap.nemo" -o "$WORK/nomap.gguf"
[ ! -e "$WORK/nomap.gguf" ] || fail "convert of a refused model left $WORK/nomap.gguf"
# the transformers layout without its map (processor_config.json's prompt_dictionary)
cp -r "$S/stream_prompt_hf" "$WORK/hf" || exit 1
python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
del j["prompt_dictionary"]
json.dump(j, open(sys.argv[2], "w"))' "$S/stream_prompt_hf/processor_config.json" "$WORK/hf/processor_config.json" || exit 1
expect 3 "processor_config.json: 'prompt_dictionary' is missing or empty" "$VKASR" transcribe -np -m "$WORK/hf" "$CLIP"

# -v names the attention that runs: the trained chunked mask of the lookahead chosen, not full attention
expect 0 "attention: chunked [8, 3] (chunks of 4 frames, each query sees its own and 2 before it; lookahead 320 ms" \
    "$VKASR" transcribe -v -m "$S/stream_rnnt.nemo" --lookahead 320 "$CLIP"
grep -q "attention: full" "$WORK/err" && fail "-v says full attention for a chunked-mask model"

# JSON output: the detected language and the events; the tags and <EOU>/<EOB> only among the tokens
# check_json FILE LANGUAGE KINDS: the file's language (or none), its event kinds in order, and no event
# piece in the text, a word or a segment
check_json() {
    python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
lang = sys.argv[2] or None
kinds = sys.argv[3].split(",") if sys.argv[3] else []
texts = [j["text"]] + [w["text"] for w in j["words"]] + [s["text"] for s in j["segments"]]
bad = [t for t in texts for e in j.get("events", []) if e["text"] in t or "<" + e["text"] + ">" in t]
got = [e["kind"] for e in j.get("events", [])]
ok = j.get("language") == lang and got == kinds and not bad and j["text"]
print("%s: language %s, events %s, event text in %s" % (sys.argv[1], j.get("language"), got, bad))
sys.exit(0 if ok else 1)' "$@" || fail "$1: want language '$2', events '$3', no event text"
}
expect 0 "" "$VKASR" transcribe -np -m "$S/stream_prompt.nemo" -oj -of "$WORK/auto" "$CLIP"
check_json "$WORK/auto.json" de-DE language
expect 0 "" "$VKASR" transcribe -np -m "$S/stream_prompt.nemo" --language de-DE -oj -of "$WORK/de" "$CLIP"
check_json "$WORK/de.json" "" ""
expect 0 "" "$VKASR" transcribe -np -m "$S/stream_eou.nemo" -oj -of "$WORK/eou" "$DATA/audio/parity/us_fox.wav"
check_json "$WORK/eou.json" "" end_of_utterance,end_of_utterance,backchannel

# live --json: the segment an end of utterance ends says so; a tag gives the segment's language
"$VKASR" live -np -p f32 -m "$S/stream_eou.nemo" --json --simulate "$DATA/audio/parity/us_fox.wav" --speed 0 \
    >"$WORK/live_eou.jsonl" 2>"$WORK/err" || fail "live on the EOU model: exit $?"
grep -q '"end_of_utterance":true' "$WORK/live_eou.jsonl" || fail "live --json: no end_of_utterance"
grep -q '<EO[UB]>' "$WORK/live_eou.jsonl" && fail "live --json: <EOU> or <EOB> in the output"
"$VKASR" live -np -p f32 -m "$S/stream_prompt.nemo" --json --simulate "$CLIP" --speed 0 >"$WORK/live_auto.jsonl" \
    2>"$WORK/err" || fail "live on the prompt model: exit $?"
grep -q '"language":"de-DE"' "$WORK/live_auto.jsonl" || fail "live --json: no language"
grep -q '<de-DE>' "$WORK/live_auto.jsonl" && fail "live --json: a tag in the output"

[ "$fails" -eq 0 ] && echo "all checks passed"
exit $((fails > 0))
