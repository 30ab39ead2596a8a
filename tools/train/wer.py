#!/usr/bin/env python3
"""Word error rate with the normalisation of tools/cli/wer.c (the two must agree; both are tested on the
same cases: `python3 tools/train/wer.py selftest`, tests/test_wer.c).

Normalisation (ASCII case folding only, UTF-8 safe):
  * ASCII A-Z -> a-z;
  * apostrophes (U+0027, U+2019) are removed ("don't" -> "dont");
  * any other ASCII character that is not a-z or 0-9 is a word separator (punctuation, symbols,
    control characters, white space);
  * non-ASCII characters belong to words, except the Unicode separators and punctuation listed in
    SEPARATORS below (no-break space, the General Punctuation block U+2000-U+206F, CJK symbols and
    punctuation U+3000-U+303F, and Latin-1 punctuation), which separate words;
  * words are compared exactly after that.
WER = (substitutions + deletions + insertions) / reference words, from a word-level Levenshtein
alignment; an empty reference gives 0 for an empty hypothesis and 1 otherwise.

Scoring vkasr's output (tools/train/eval_wer.sh uses this):
  python3 tools/train/wer.py score --refs DIR/refs.tsv --hyps hyps.jsonl [--max-wer 0.10]
refs.tsv: header "file<TAB>voice<TAB>seen_voice<TAB>text" (corpus.py writes it); hyps.jsonl: one JSON
object per line with "file" and "text" (vkasr transcribe --format json).  Prints WER per voice, for
seen and unseen voices, and in total; exit status 1 when --max-wer is given and exceeded.
"""

import argparse
import json
import os
import sys

LATIN1_PUNCT = {0xA0, 0xA1, 0xA7, 0xAB, 0xB6, 0xB7, 0xBB, 0xBF}


def is_separator(cp):
    """Non-ASCII code points that separate words (see module doc)."""
    return cp in LATIN1_PUNCT or 0x2000 <= cp <= 0x206F or 0x3000 <= cp <= 0x303F


def normalize(s):
    out = []
    for ch in s:
        cp = ord(ch)
        if cp == 0x27 or cp == 0x2019:
            continue
        if cp < 0x80:
            if 0x41 <= cp <= 0x5A:
                out.append(chr(cp + 32))
            elif 0x61 <= cp <= 0x7A or 0x30 <= cp <= 0x39:
                out.append(ch)
            else:
                out.append(" ")
        elif is_separator(cp):
            out.append(" ")
        else:
            out.append(ch)
    return " ".join("".join(out).split())


def align_counts(ref_words, hyp_words):
    """(substitutions, deletions, insertions) of a minimum-edit alignment; among equal-cost
    alignments the backtrace prefers match/substitution, then deletion, then insertion (the same
    order as tools/cli/wer.c, so the split agrees too)."""
    n, m = len(ref_words), len(hyp_words)
    d = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        d[i][0] = i
    for j in range(m + 1):
        d[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            c = 0 if ref_words[i - 1] == hyp_words[j - 1] else 1
            d[i][j] = min(d[i - 1][j - 1] + c, d[i - 1][j] + 1, d[i][j - 1] + 1)
    s = de = ins = 0
    i, j = n, m
    while i > 0 or j > 0:
        if i > 0 and j > 0 and d[i][j] == d[i - 1][j - 1] + (0 if ref_words[i - 1] == hyp_words[j - 1] else 1):
            s += 0 if ref_words[i - 1] == hyp_words[j - 1] else 1
            i, j = i - 1, j - 1
        elif i > 0 and d[i][j] == d[i - 1][j] + 1:
            de += 1
            i -= 1
        else:
            ins += 1
            j -= 1
    return s, de, ins


def counts(ref, hyp):
    """(errors, reference words, S, D, I) after normalisation."""
    r, h = normalize(ref).split(), normalize(hyp).split()
    s, d, i = align_counts(r, h)
    return s + d + i, len(r), s, d, i


def rate(errors, nref):
    if nref == 0:
        return 0.0 if errors == 0 else 1.0
    return errors / nref


def wer(ref, hyp):
    e, n = counts(ref, hyp)[:2]
    return rate(e, n)


class Tally:
    def __init__(self):
        self.err = self.ref = self.s = self.d = self.i = self.n = 0

    def add(self, ref, hyp):
        e, n, s, d, i = counts(ref, hyp)
        self.err += e
        self.ref += n
        self.s += s
        self.d += d
        self.i += i
        self.n += 1

    def rate(self):
        return rate(self.err, self.ref)

    def line(self, name):
        return (f"{name:<24} {self.n:5d} utts {self.ref:6d} words  WER {100 * self.rate():6.2f}%  "
                f"(S {self.s}, D {self.d}, I {self.i})")


def score(rows, log=print):
    """rows: iterable of (voice, seen, ref, hyp). Returns (total Tally, {voice: Tally}, lines)."""
    total, seen_t, unseen_t, per = Tally(), Tally(), Tally(), {}
    for voice, seen, ref, hyp in rows:
        per.setdefault(voice, Tally()).add(ref, hyp)
        (seen_t if seen else unseen_t).add(ref, hyp)
        total.add(ref, hyp)
    lines = [per[v].line(v) for v in sorted(per)]
    lines.append(seen_t.line("seen voices"))
    lines.append(unseen_t.line("unseen voices"))
    lines.append(total.line("TOTAL"))
    for ln in lines:
        log(ln)
    return total, per, lines


# the cases tests/test_wer.c checks too (keep both in sync)
CASES = [
    ("the cat sat", "the cat sat", 0, 3),
    ("the cat sat", "the dog sat", 1, 3),
    ("the cat sat", "the cat", 1, 3),
    ("the cat sat", "the cat sat down", 1, 3),
    ("", "", 0, 0),
    ("", "hello there", 2, 0),
    ("hello there", "", 2, 2),
    ("Hello, World!", "hello world", 0, 2),
    ("Don't STOP", "dont stop", 0, 2),
    ("it\u2019s fine", "its fine", 0, 2),
    ("caf\u00e9 na\u00efve", "caf\u00e9 naive", 1, 2),
    ("\u00fcber  alles\u2014ja", "\u00fcber alles ja", 0, 3),
    ("a b c d", "b c d e", 2, 4),
    ("twenty-three", "twenty three", 0, 2),
    ("\u4f60\u597d\u3002\u4e16\u754c", "\u4f60\u597d \u4e16\u754c", 0, 2),
]


def selftest():
    for ref, hyp, e, n in CASES:
        got = counts(ref, hyp)[:2]
        assert got == (e, n), (ref, hyp, got, (e, n))
    for text, want in [("  A\tb\nC  ", "a b c"), ("...!?", ""), ('It\'s  the 2nd-best; "OK"?', "its the 2nd best ok"),
                       ("\u00c9T\u00c9", "\u00c9t\u00c9"), ("a\u00a0b", "a b"), ("x\u2026y", "x y"),
                       ("\u2047 ok", "ok"), ("\U0001F600smile", "\U0001F600smile")]:
        assert normalize(text) == want, (text, normalize(text), want)
    # the S/D/I splits tests/test_wer.c checks
    for ref, hyp, sdi in [("a b c", "a x c d", (1, 0, 1)), ("one two three four five", "one three four five six",
                                                              (0, 1, 1)), ("x", "y z w", (1, 0, 2)),
                          ("the cat sat", "the cat", (0, 1, 0)), ("", "hello there", (0, 0, 2))]:
        assert align_counts(normalize(ref).split(), normalize(hyp).split()) == sdi, (ref, hyp)
    assert rate(0, 0) == 0.0 and rate(3, 0) == 1.0
    print(f"wer selftest ok ({len(CASES)} cases)")


def main(argv=None):
    ap = argparse.ArgumentParser(description="word error rate (tools/cli/wer.c normalisation)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("score")
    p.add_argument("--refs", required=True)
    p.add_argument("--hyps", required=True)
    p.add_argument("--max-wer", type=float, default=None)
    p.add_argument("--details", default=None, help="write per-clip ref/hyp/errors TSV here")
    sub.add_parser("selftest")
    p = sub.add_parser("pair")
    p.add_argument("ref")
    p.add_argument("hyp")
    a = ap.parse_args(argv)
    if a.cmd == "selftest":
        selftest()
        return 0
    if a.cmd == "pair":
        e, n, s, d, i = counts(a.ref, a.hyp)
        print(f"errors {e} / {n} words: WER {100 * rate(e, n):.2f}% (S {s}, D {d}, I {i})")
        return 0
    refs = []
    with open(a.refs, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        col = {k: header.index(k) for k in ("file", "voice", "text")}
        seen_col = header.index("seen_voice") if "seen_voice" in header else None
        for line in f:
            c = line.rstrip("\n").split("\t")
            if len(c) < len(header):
                continue
            refs.append((c[col["file"]], c[col["voice"]], seen_col is None or c[seen_col] == "1", c[col["text"]]))
    hyps = {}
    with open(a.hyps, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                j = json.loads(line)
            except json.JSONDecodeError:
                continue
            hyps[os.path.basename(j.get("file", ""))] = j.get("text", "")
    missing = [r[0] for r in refs if os.path.basename(r[0]) not in hyps]
    if missing:
        print(f"wer.py: {len(missing)} clips have no transcript (counted as empty): {missing[:5]}", file=sys.stderr)
    rows = [(v, seen, ref, hyps.get(os.path.basename(fn), "")) for fn, v, seen, ref in refs]
    total, _, _ = score(rows)
    if a.details:
        with open(a.details, "w", encoding="utf-8") as f:
            f.write("file\tvoice\terrors\twords\tref\thyp\n")
            for (fn, v, seen, ref), (_, _, _, hyp) in zip(refs, rows):
                e, n = counts(ref, hyp)[:2]
                f.write(f"{fn}\t{v}\t{e}\t{n}\t{normalize(ref)}\t{normalize(hyp)}\n")
    if a.max_wer is not None and total.rate() > a.max_wer:
        print(f"wer.py: total WER {100 * total.rate():.2f}% exceeds the bound {100 * a.max_wer:.2f}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
