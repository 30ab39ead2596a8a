#!/bin/bash
# test_pull.sh — `vkasr pull`, `vkasr models` and -m NAME against a local stand-in for the Hugging Face hub
# (tests/hub_server.py on 127.0.0.1): the index's alias pulled (through a connection cut mid-body, which a
# resume completes) and transcribed like the file itself; org/repo by rule; --offline; a wrong sha256, a
# gated repository, missing files, Ctrl-C on a slow server, a disk limit and two pulls at once each leave a
# consistent cache (no snapshot entry without its verified blob, a resumable .incomplete, no held lock) and
# say what happened; --convert; transcribe --pull.
# usage: test_pull.sh VKASR VKASR_VALIDATED SRC_DIR WORK_DIR
set -u
VKASR=$1 VALIDATED=$2 SRC=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK/repos" || exit 1
MODEL=$SRC/models/vkasr-tdt-tiny-en.gguf CLIP=$SRC/tests/data/audio/parity/short_okay.wav
REPO=nvidia/parakeet-tdt-0.6b-v3 FILE=parakeet-tdt-0.6b-v3.q8_0.gguf
COMMIT=0123456789abcdef0123456789abcdef01234567 # hub_server.py's
SHA=$(sha256sum "$MODEL" | cut -d' ' -f1) SIZE=$(stat -c %s "$MODEL")
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect() { # expect CODE CMD...: stdout to $WORK/out, stderr to $WORK/err, checks the exit code
    want=$1; shift
    "$@" >"$WORK/out" 2>"$WORK/err"; got=$?
    [ "$got" -eq "$want" ] || { fail "exit $got (want $want): $*"; sed 's/^/  stderr: /' "$WORK/err" | tail -5; }
}
says() { grep -q -- "$1" "$WORK/err" || { fail "stderr lacks '$1'"; sed 's/^/  stderr: /' "$WORK/err" | tail -5; }; }

# the hub's repositories: the shipped model as NVIDIA's q8_0 file, a small file kept in git, a .nemo repo
mkdir -p "$WORK/repos/$REPO" "$WORK/repos/nvidia/tiny-nemo" "$WORK/repos/nvidia/tiny-hf/expected" || exit 1
for f in config.json generation_config.json model.safetensors processor_config.json tokenizer.json \
    tokenizer_config.json; do # a transformers repository (and a file in a folder, which it does not need)
    ln -s "$SRC/tests/data/fixtures/tdt/$f" "$WORK/repos/nvidia/tiny-hf/$f" || exit 1
done
echo "{}" >"$WORK/repos/nvidia/tiny-hf/expected/x.json"
ln -s "$MODEL" "$WORK/repos/$REPO/$FILE" && echo "# card" >"$WORK/repos/$REPO/README.md" &&
    ln -s "$SRC/tests/data/nemo/tdt_ctc.nemo" "$WORK/repos/nvidia/tiny-nemo/tdt.nemo" || exit 1
# the index the test uses ($VKASR_PULL_INDEX, before the built-in one): the alias parakeet-tdt-0.6b-v3 (the
# repository's name) and tiny-alias pinned to the server's commit, with the file's real sha256 and size
cat >"$WORK/index.json" <<EOF
{"models": [{"repo": "$REPO", "aliases": ["tiny-alias"], "revision": "$COMMIT",
  "artifacts": [{"role": "asr", "type": "file", "filename": "$FILE", "size": $SIZE, "sha256": "$SHA"}]}]}
EOF

touch "$WORK/log"
python3 "$SRC/tests/hub_server.py" "$WORK/repos" "$WORK/port" "$WORK/log" 300 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
[ -s "$WORK/port" ] || { echo "FAIL: hub_server.py did not start"; exit 1; }
HUB=http://127.0.0.1:$(cat "$WORK/port")
export HOME=$WORK/home VKASR_PULL_INDEX=$WORK/index.json VKASR_PULL_BACKOFF_MS=50
unset HF_TOKEN HF_HOME HF_HUB_OFFLINE HF_TOKEN_PATH XDG_CACHE_HOME
use() { export HF_HUB_CACHE=$WORK/$1 HF_ENDPOINT=$HUB/$2; } # use CACHE MODE
repo_dir() { echo "$HF_HUB_CACHE/models--${1%%/*}--${1#*/}"; }
# consistent CACHE REPO: every snapshot entry links to a blob whose sha256 is its name (LFS files), no
# temporary files, and no lock held
consistent() {
    d=$(repo_dir "$1")
    for l in "$d"/snapshots/*/*; do
        [ -e "$l" ] || [ ! -L "$l" ] || fail "$l: a dangling link"
        [ -L "$l" ] || continue
        case $(readlink "$l") in ../../blobs/*) ;; *) fail "$l: not a relative link to ../../blobs" ;; esac
        b=$(basename "$(readlink "$l")")
        if [ "$b" = "$SHA" ]; then # the served model's blob: the same bytes (cmp is quicker than sha256sum)
            cmp -s "$l" "$MODEL" || fail "$l: not the served model's bytes"
        elif [ ${#b} -eq 64 ]; then
            [ "$(sha256sum <"$l" | cut -d' ' -f1)" = "$b" ] || fail "$l: sha256 is not $b"
        fi
    done
    ls "$d"/snapshots/*/*.tmp.* >/dev/null 2>&1 && fail "$d: a temporary link left"
    for k in "$HF_HUB_CACHE"/.locks/*/*.lock; do
        [ -e "$k" ] && ! flock -n "$k" true && fail "$k is still held"
    done
    return 0
}
lfs_gets() { grep -c "^$1 GET /lfs/" "$WORK/log"; } # body requests of a mode

# ---- not cached: -m names the cache and the command that fills it; --offline does not touch the net
use c_main cut
expect 3 "$VKASR" transcribe -m parakeet-tdt-0.6b-v3 -np "$CLIP"
says "model 'parakeet-tdt-0.6b-v3' is not in the Hugging Face cache ($WORK/c_main): run \`vkasr pull parakeet-tdt-0.6b-v3\`"
n0=$(wc -l <"$WORK/log")
expect 3 "$VKASR" pull parakeet-tdt-0.6b-v3 --offline
says "offline"
HF_HUB_OFFLINE=1 expect 3 "$VKASR" pull parakeet-tdt-0.6b-v3
[ "$(wc -l <"$WORK/log")" -eq "$n0" ] || fail "--offline / HF_HUB_OFFLINE made requests"

# ---- the alias, through a connection cut halfway: the retry resumes with a Range and completes it
expect 0 "$VKASR" pull parakeet-tdt-0.6b-v3 --no-progress
snap=$(repo_dir $REPO)/snapshots/$COMMIT/$FILE
[ "$(cat "$WORK/out")" = "$snap" ] || fail "pull prints the snapshot path (got '$(cat "$WORK/out")')"
says "retrying"
grep -q "^cut GET /lfs/$REPO/$FILE bytes=[1-9][0-9]*-$" "$WORK/log" || fail "the resume asked for a Range"
cmp -s "$snap" "$MODEL" || fail "the pulled file differs from the served one"
[ "$(readlink "$snap")" = "../../blobs/$SHA" ] || fail "snapshot link: $(readlink "$snap")"
[ ! -e "$(repo_dir $REPO)/refs/main" ] || fail "a pinned commit wrote refs/main"
ls "$(repo_dir $REPO)"/blobs/*.incomplete >/dev/null 2>&1 && fail "an .incomplete is left after success"
consistent $REPO
# again: from the cache, without a request
n0=$(wc -l <"$WORK/log")
expect 0 "$VKASR" pull parakeet-tdt-0.6b-v3
[ "$(wc -l <"$WORK/log")" -eq "$n0" ] || fail "a second pull of a pinned alias made requests"
# transcribes as the file itself does, and -v names the file the name stands for
expect 0 "$VKASR" transcribe -m "$MODEL" -np "$CLIP"
cp "$WORK/out" "$WORK/direct.txt"
[ -s "$WORK/direct.txt" ] || fail "the shipped model transcribed nothing"
expect 0 "$VALIDATED" transcribe -m parakeet-tdt-0.6b-v3 -v "$CLIP"
cmp -s "$WORK/out" "$WORK/direct.txt" || fail "-m parakeet-tdt-0.6b-v3 transcribes differently from the file"
says "model 'parakeet-tdt-0.6b-v3' from the Hugging Face cache: $snap"
# org/repo[:FILE] means the main branch, which the cache does not know yet (as huggingface_hub has it)
expect 3 "$VKASR" transcribe -m "$REPO:$FILE" -np "$CLIP"
says "no refs/main"
# vkasr models: the repository, its file, size and alias
expect 0 "$VKASR" models
grep -q "^$REPO$" "$WORK/out" && grep -q "$FILE .*16.0 MiB  \[parakeet-tdt-0.6b-v3,tiny-alias\]" "$WORK/out" ||
    { fail "vkasr models"; cat "$WORK/out"; }

# ---- org/repo by rule (the listing: the .gguf, not README.md), refs/main written
use c_repo ok
expect 0 "$VKASR" pull $REPO --no-progress
[ "$(cat "$(repo_dir $REPO)/refs/main")" = "$COMMIT" ] || fail "refs/main holds the commit"
[ "$(cat "$WORK/out")" = "$(repo_dir $REPO)/snapshots/$COMMIT/$FILE" ] || fail "org/repo: $(cat "$WORK/out")"
consistent $REPO
expect 0 "$VKASR" pull "$REPO:README.md" --no-progress # a file kept in git: 200, no redirect, no sha256
[ "$(cat "$(repo_dir $REPO)/snapshots/$COMMIT/README.md")" = "# card" ] || fail "README.md pulled"
# what -m loads for each spelling (pull --offline prints the library's resolution, vkasr_hub_resolve)
for name in $REPO "$REPO:$FILE" "$REPO:q8_0" "$REPO:Q8_0"; do
    expect 0 "$VKASR" pull --offline "$name"
    [ "$(cat "$WORK/out")" = "$(repo_dir $REPO)/snapshots/$COMMIT/$FILE" ] || fail "$name: $(cat "$WORK/out")"
done
expect 3 "$VKASR" pull "$REPO:q4_k"
says "no GGUF of the type asked"
# a renamed repository: the hub's 307 on its own host is followed, the files kept under the name asked
expect 0 "$VKASR" pull renamed/parakeet-tdt-0.6b-v3 --no-progress
[ "$(cat "$WORK/out")" = "$(repo_dir renamed/parakeet-tdt-0.6b-v3)/snapshots/$COMMIT/$FILE" ] ||
    fail "renamed: $(cat "$WORK/out")"
consistent renamed/parakeet-tdt-0.6b-v3

# ---- missing: a file, a repository, a revision (404, the hub's error code named)
expect 3 "$VKASR" pull "$REPO:missing.gguf"
says "not found (HTTP 404, EntryNotFound"
[ ! -e "$(repo_dir $REPO)/snapshots/$COMMIT/missing.gguf" ] || fail "404: a snapshot entry"
expect 3 "$VKASR" pull nvidia/no-such-model
says "RepoNotFound"
consistent $REPO

# ---- a body that is not the announced file: refused, nothing installed, nothing kept
use c_bad badsha
expect 1 "$VKASR" pull $REPO --no-progress
says "sha256 [0-9a-f]* differs from the expected $SHA: refused, nothing installed"
ls "$(repo_dir $REPO)"/blobs/* "$(repo_dir $REPO)"/snapshots/*/* >/dev/null 2>&1 && fail "badsha: files left"
consistent $REPO
expect 3 "$VKASR" transcribe -m $REPO -np "$CLIP"

# ---- a gated repository: 401 without a token (the message says HF_TOKEN), refused token, then 200
use c_auth auth
expect 1 "$VKASR" pull $REPO
says "gated or private; set \$HF_TOKEN"
HF_TOKEN=wrong expect 1 "$VKASR" pull $REPO
says "the token in \$HF_TOKEN was refused"
HF_TOKEN=sesame expect 0 "$VKASR" pull $REPO --no-progress
consistent $REPO
echo sesame >"$WORK/token" # the token file huggingface-cli login writes (the hub is asked again: main)
HF_TOKEN_PATH=$WORK/token expect 0 "$VKASR" pull $REPO
says "already in the cache"

# ---- Ctrl-C on a slow server: a progress line, a resumable .incomplete, no snapshot entry, no held lock
use c_int slow
"$VKASR" pull $REPO >"$WORK/out" 2>"$WORK/err" &
pid=$!
part=""
for _ in $(seq 100); do
    part=$(ls "$(repo_dir $REPO)"/blobs/*.incomplete 2>/dev/null)
    [ -n "$part" ] && [ "$(stat -c %s "$part")" -gt 65536 ] && break
    sleep 0.05
done
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 1 ] || fail "Ctrl-C: exit $rc (want 1)"
says "interrupted"
says "kept in .*\.incomplete: run \`vkasr pull $REPO\` again to resume"
grep -q "%" "$WORK/err" || fail "no progress line"
[ -n "$part" ] && [ -s "$part" ] || fail "Ctrl-C: no .incomplete kept"
ls "$(repo_dir $REPO)"/snapshots/*/* >/dev/null 2>&1 && fail "Ctrl-C: a snapshot entry"
consistent $REPO
kept=$(stat -c %s "$part")
expect 0 "$VKASR" models
grep -q "partial download: blobs/$SHA.incomplete" "$WORK/out" || fail "vkasr models lists the partial download"
use c_int ok
expect 0 "$VKASR" pull $REPO --no-progress
says "resuming at byte $kept"
grep -q "^ok GET /lfs/$REPO/$FILE bytes=$kept-$" "$WORK/log" || fail "the resume after Ctrl-C asked for a Range"
consistent $REPO

# ---- a file-size limit (a full disk's write error): said, .incomplete kept, then resumed
use c_full ok
(trap '' XFSZ; ulimit -f 4096; exec "$VKASR" pull $REPO --no-progress) >"$WORK/out" 2>"$WORK/err"
rc=$?
[ $rc -eq 4 ] || fail "file-size limit: exit $rc (want 4)"
says "File too large"
says "are kept in"
ls "$(repo_dir $REPO)"/snapshots/*/* >/dev/null 2>&1 && fail "file-size limit: a snapshot entry"
expect 0 "$VKASR" pull $REPO --no-progress
says "resuming at byte 4194304"
consistent $REPO

# ---- two pulls of one file at once: one downloads, the other waits on the lock; one body fetched
use c_two steady
"$VKASR" pull $REPO --no-progress >"$WORK/out1" 2>"$WORK/err1" &
p1=$!
"$VKASR" pull $REPO --no-progress >"$WORK/out2" 2>"$WORK/err2" &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] || { fail "two pulls: exits $r1 $r2"; cat "$WORK/err1" "$WORK/err2"; }
cmp -s "$WORK/out1" "$WORK/out2" || fail "two pulls: different paths"
[ "$(lfs_gets steady)" -eq 1 ] || fail "two pulls: $(lfs_gets steady) body downloads (want 1)"
cat "$WORK/err1" "$WORK/err2" | grep -q "waiting for it\|already in the cache" || fail "two pulls: no wait said"
cmp -s "$(cat "$WORK/out1")" "$MODEL" || fail "two pulls: the file differs"
consistent $REPO

# ---- --convert: a .nemo repository converted once into a GGUF beside it, which -m then prefers
use c_conv ok
expect 0 "$VKASR" pull nvidia/tiny-nemo --convert f32 --no-progress
conv=$(repo_dir nvidia/tiny-nemo)/snapshots/$COMMIT/tdt.f32.gguf
[ "$(cat "$WORK/out")" = "$conv" ] || fail "--convert prints the GGUF's path (got '$(cat "$WORK/out")')"
expect 0 "$VKASR" convert "$WORK/repos/nvidia/tiny-nemo/tdt.nemo" -o "$WORK/direct.gguf" --type f32
cmp -s "$conv" "$WORK/direct.gguf" || fail "--convert wrote other bytes than vkasr convert"
expect 0 "$VKASR" pull nvidia/tiny-nemo --convert f32
says "already converted"
expect 0 "$VKASR" pull --offline nvidia/tiny-nemo
[ "$(cat "$WORK/out")" = "$conv" ] || fail "-m org/repo prefers the converted GGUF: $(cat "$WORK/out")"
consistent nvidia/tiny-nemo

# ---- a transformers repository: its top-level JSON and safetensors files, one snapshot directory
mkdir -p "$WORK/tmp" || exit 1
TMPDIR=$WORK/tmp expect 0 "$VKASR" pull nvidia/tiny-hf --convert f32 --no-progress
[ -z "$(ls -A "$WORK/tmp")" ] || fail "--convert left $(ls "$WORK/tmp") in TMPDIR"
hf=$(repo_dir nvidia/tiny-hf)/snapshots/$COMMIT
[ "$(cat "$WORK/out")" = "$hf/tiny-hf.f32.gguf" ] || fail "transformers --convert: $(cat "$WORK/out")"
for f in config.json model.safetensors tokenizer.json processor_config.json; do
    cmp -s "$hf/$f" "$SRC/tests/data/fixtures/tdt/$f" || fail "transformers: $f"
done
[ ! -e "$hf/expected" ] || fail "transformers: a file in a folder was pulled"
mkdir -p "$WORK/hfsrc" && ln -sfn "$SRC/tests/data/fixtures/tdt" "$WORK/hfsrc/tiny-hf" # general.name: the repository's
expect 0 "$VKASR" convert "$WORK/hfsrc/tiny-hf" -o "$WORK/direct_hf.gguf" --type f32
cmp -s "$hf/tiny-hf.f32.gguf" "$WORK/direct_hf.gguf" || fail "transformers --convert wrote other bytes"
consistent nvidia/tiny-hf

# ---- transcribe --pull: fetches what is missing, then transcribes
use c_flag ok
expect 0 "$VKASR" transcribe --pull -m tiny-alias -np "$CLIP"
cmp -s "$WORK/out" "$WORK/direct.txt" || fail "transcribe --pull transcribes differently"
consistent $REPO
# help on stdout: the index's aliases (and $VKASR_PULL_INDEX's), the cache; usage errors exit 2
expect 0 "$VKASR" pull --help
grep -q "parakeet-tdt-0.6b-v3,tiny-alias" "$WORK/out" && grep -q "nemotron-en" "$WORK/out" &&
    grep -q "(here: $HF_HUB_CACHE)" "$WORK/out" || fail "pull --help lists the aliases and the cache"
expect 0 "$VKASR" models --help
grep -q "usage: vkasr models" "$WORK/out" || fail "models --help"
expect 2 "$VKASR" pull
says "pull needs a NAME"
# names that are neither: usage errors naming the rule
expect 2 "$VKASR" pull "not a name"
says "neither an alias of the model index nor org/repo"

[ "$fails" -eq 0 ] && echo "test_pull: all passed"
exit $((fails > 0))
