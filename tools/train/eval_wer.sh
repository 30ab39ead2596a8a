#!/usr/bin/env bash
# Word error rate of vkasr itself on a directory of clips with references (tools/train/README.md).
#
#   tools/train/eval_wer.sh [-b VKASR] [-m MODEL] [--max-wer F] [--details FILE] CLIPDIR [-- VKASR_ARGS...]
#
# CLIPDIR holds WAV files and refs.tsv (file, voice, seen_voice, text), as written by
# `python3 tools/train/corpus.py heldout --out CLIPDIR` or found in train.py's heldout-sample.tar.gz.
# Runs `vkasr transcribe --format json` once on all listed clips (one model load), then prints the WER
# per voice, for seen and unseen voices and in total (tools/train/wer.py: the normalisation of
# tools/cli/wer.c). --max-wer 0.10 makes the exit status 1 when the total exceeds 10 %.
# VKASR defaults to build/vkasr, then `vkasr` on PATH; MODEL defaults to the CLI's own default.
# Needs bash and python3 (the GPU machine and the build machine both have them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
vkasr="" model="" max_wer="" details=""
usage() { sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        -b) vkasr="$2"; shift 2 ;;
        -m) model="$2"; shift 2 ;;
        --max-wer) max_wer="$2"; shift 2 ;;
        --details) details="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        -*) echo "eval_wer.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) if [ -z "${clips:-}" ]; then clips="$1"; shift; else break; fi ;;
    esac
done
[ -n "${clips:-}" ] || { usage >&2; exit 2; }
[ -f "$clips/refs.tsv" ] || { echo "eval_wer.sh: $clips/refs.tsv not found" >&2; exit 2; }
if [ -z "$vkasr" ]; then
    if [ -x "$root/build/vkasr" ]; then vkasr="$root/build/vkasr"
    elif [ -x "$root/build/tools/vkasr" ]; then vkasr="$root/build/tools/vkasr"
    else vkasr="$(command -v vkasr || true)"; fi
fi
[ -n "$vkasr" ] && [ -x "$vkasr" ] || { echo "eval_wer.sh: vkasr binary not found (use -b)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "eval_wer.sh: python3 not found" >&2; exit 2; }

files=()
while IFS=$'\t' read -r f _rest; do
    [ "$f" = "file" ] && continue
    [ -n "$f" ] && files+=("$clips/$f")
done <"$clips/refs.tsv"
[ "${#files[@]}" -gt 0 ] || { echo "eval_wer.sh: no clips listed in $clips/refs.tsv" >&2; exit 2; }

hyps="$(mktemp)"
trap 'rm -f "$hyps"' EXIT
args=(transcribe --format json -np)
[ -n "$model" ] && args+=(-m "$model")
start=$(date +%s.%N)
set +e
"$vkasr" "${args[@]}" "$@" "${files[@]}" >"$hyps"
rc=$?
set -e
end=$(date +%s.%N)
n_out=$(grep -c '^{' "$hyps" || true)
echo "vkasr: ${#files[@]} clips, $n_out transcripts, exit status $rc, $(python3 -c "print(f'{$end-$start:.1f}')") s"
[ "$rc" -eq 0 ] || echo "eval_wer.sh: vkasr exited with status $rc (missing transcripts count as empty)" >&2
score=(python3 "$here/wer.py" score --refs "$clips/refs.tsv" --hyps "$hyps")
[ -n "$max_wer" ] && score+=(--max-wer "$max_wer")
[ -n "$details" ] && score+=(--details "$details")
"${score[@]}"
