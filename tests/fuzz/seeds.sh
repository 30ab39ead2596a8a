#!/bin/sh
# seeds.sh TARGET DATA OUT — writes the seed corpus of fuzz target TARGET into directory OUT (emptied
# first) from the committed fixtures under DATA (tests/data), plus DATA/fuzz/TARGET: inputs that once
# broke something, and seeds for what the fixtures lack (seed_*). scripts/fuzz.sh starts libFuzzer from
# it; the CTest replay tests run every file of it through the target.
set -eu
target=$1 data=$2 out=$3
rm -rf "$out"
mkdir -p "$out"

# copy FILE...: each existing file into OUT, named after its path under DATA ('/' -> '_')
copy() {
    for f in "$@"; do
        [ -f "$f" ] || continue
        rel=${f#"$data"/}
        cp "$f" "$out/$(printf '%s' "$rel" | tr / _)"
    done
}

case $target in
gguf) copy "$data"/malformed/*.gguf "$data"/gguf_foreign/*.gguf ;;
safetensors) copy "$data"/malformed/*/model.safetensors "$data"/tiny/*/*.safetensors ;;
hf_config)
    # config.json, a NUL byte, then preprocessor_config.json (or processor_config.json)
    for d in "$data"/tiny/* "$data"/malformed/* "$data"/fixtures/*; do
        fe=$d/preprocessor_config.json
        [ -f "$fe" ] || fe=$d/processor_config.json
        [ -f "$d/config.json" ] && [ -f "$fe" ] || continue
        rel=${d#"$data"/}
        { cat "$d/config.json"; printf '\000'; cat "$fe"; } >"$out/$(printf '%s' "$rel" | tr / _)"
    done
    ;;
tokenizer) copy "$data"/*/*/tokenizer.json ;;
audio) copy "$data"/audio/*.* ;;
cli_output) copy "$data"/audio/*/refs.tsv "$data"/malformed/README.md ;;
nemo) copy "$data"/nemo/*.nemo ;;
nemo_spm) copy "$data"/fixtures/spm/*.model ;;
nemo_pickle | nemo_config) ;; # seeds under DATA/fuzz/TARGET (tools/fixtures/make_nemo.py)
rt_events) ;; # seeds under DATA/fuzz/TARGET: a connection's messages, one a line
*)
    echo "seeds.sh: unknown fuzz target '$target'" >&2
    exit 2
    ;;
esac
if [ -d "$data/fuzz/$target" ]; then
    for f in "$data/fuzz/$target"/*; do
        [ -f "$f" ] && cp "$f" "$out/fuzz_$(basename "$f")"
    done
fi
n=$(ls "$out" | wc -l)
if [ "$n" -eq 0 ]; then
    echo "seeds.sh: no seeds for '$target' under $data" >&2
    exit 1
fi
