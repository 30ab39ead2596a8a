#!/usr/bin/env python3
"""Synthetic English speech corpus for training vkasr's small default model (tools/train/README.md).

numpy + the Python standard library only (no torch), so every part runs on the build machine too.
  * words.txt -> a lexicon with inflected forms (plurals, verb forms) derived by rule;
  * a sentence generator: templates with some grammar (agreement, tenses, questions, numbers
    written as words, dates, times, money) plus a share of random word sequences;
  * normalize_text(): the training-target / WER normalisation (lowercase, a-z and single spaces);
  * a deterministic train / held-out split: held-out sentences never occur in training, and the
    held-out voices include variants and an accent never used in training;
  * espeak-ng synthesis through libespeak-ng with ctypes (one library instance per worker
    process, no process spawn per utterance), varied voice, variant, rate, pitch, pitch range,
    word gap and volume;
  * resampling 22050 -> 16000 Hz (FFT, tapered band edge), light noise and gain for held-out clips;
  * build(): parallel generation into blocks cached under a directory (int16 16 kHz audio + JSON
    metadata); load(): the blocks as one array with offsets.

Determinism: every random choice goes through Rng, which uses only random.Random.random() (the one
stream Python guarantees across versions), seeded by integers.  Sentences, voices and parameters
are therefore identical on every machine; audio is identical up to the espeak-ng build and tiny
FFT rounding differences.

CLI (from the repository root; espeak-ng must be loadable, see espeak_env.sh):
  python3 tools/train/corpus.py text --n 20                 print generated sentences
  python3 tools/train/corpus.py sample --out DIR --n 300    WAVs of training-distribution clips
  python3 tools/train/corpus.py heldout --out DIR [--per-voice N]   the held-out set as WAVs + refs.tsv
  python3 tools/train/corpus.py check DIR                   listen-free checks of a WAV directory
  python3 tools/train/corpus.py build --out DIR --hours H   the cached training corpus (what train.py uses)
  python3 tools/train/corpus.py selftest                    lexicon, generator, split, resampler checks
"""

import argparse
import ctypes
import ctypes.util
import hashlib
import json
import math
import os
import random
import re
import sys
import time
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
WORDS_PATH = os.path.join(HERE, "words.txt")

# Bump when anything that changes generated audio or text changes (part of the cache key).
CORPUS_VERSION = 1

SR_OUT = 16000
SR_ESPEAK = 22050

SEED_TRAIN = 1_000_003
SEED_HELDOUT = 2_000_003
SEED_SAMPLE = 3_000_017

MIN_SECONDS = 0.8
MAX_SECONDS = 10.0
HELDOUT_BLOCK = 64  # utterances per synthesis process for the held-out set

# ----------------------------------------------------------------------------------------------
# voices
#
# A "voice" is an espeak-ng language voice (accent) plus a variant (timbre: formants, pitch
# base, Klatt synthesiser ...).  Training samples accent and variant independently from the
# TRAIN lists; the held-out set uses fixed (accent, variant) pairs.  The variants in
# HELDOUT_ONLY_VARIANTS and the accent in HELDOUT_ONLY_ACCENTS are never used in training.

TRAIN_ACCENTS = ["en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-029"]
HELDOUT_ONLY_ACCENTS = ["en-us-nyc"]

# "" = the accent's own default voice.  Whisper, croak and robot-like variants are left out:
# they are far from speech a user would record.
TRAIN_VARIANTS = [
    "", "m1", "m2", "m3", "m4", "m5", "m6", "m8", "f1", "f2", "f3", "f5",
    "klatt", "klatt2", "klatt4", "klatt5", "klatt6",
    "Andy", "Annie", "Michael", "anika", "belinda", "steph", "travis", "victor", "shelby",
    "david", "edward", "iven", "linda", "max", "paul", "rob", "robert", "zac", "aunty",
    "john", "quincy", "Lee", "Mike", "benjamin", "caleb", "grandpa", "Alex", "Andrea",
    "Jacky", "Denis", "Hugo", "Marco", "antonio", "boris", "gustave", "norbert", "pablo",
    "sandro", "Gene", "ed", "adam", "steph2", "shelby",
]
TRAIN_VARIANTS = list(dict.fromkeys(TRAIN_VARIANTS))  # keep order, drop repeats
HELDOUT_ONLY_VARIANTS = ["f4", "m7", "klatt3", "Alicia"]

# (accent, variant, seen-in-training)
HELDOUT_VOICES = [
    ("en-us", "", True),
    ("en-gb", "m3", True),
    ("en-gb-scotland", "f2", True),
    ("en-gb-x-rp", "klatt", True),
    ("en-029", "m1", True),
    ("en-gb-x-gbclan", "Annie", True),
    ("en-us", "f4", False),
    ("en-gb", "m7", False),
    ("en-gb-x-rp", "klatt3", False),
    ("en-us", "Alicia", False),
    ("en-us-nyc", "m2", False),
]


def voice_name(accent, variant):
    return accent + ("+" + variant if variant else "")


# ----------------------------------------------------------------------------------------------
# deterministic randomness


class Rng:
    """Random choices built only on random.Random.random() (stable across Python versions)."""

    def __init__(self, seed):
        self.r = random.Random(int(seed))

    def random(self):
        return self.r.random()

    def below(self, n):
        return min(int(self.r.random() * n), n - 1)

    def range(self, lo, hi):  # inclusive
        return lo + self.below(hi - lo + 1)

    def uniform(self, lo, hi):
        return lo + (hi - lo) * self.r.random()

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def chance(self, p):
        return self.r.random() < p

    def weighted(self, pairs):
        total = sum(w for w, _ in pairs)
        x = self.r.random() * total
        for w, v in pairs:
            x -= w
            if x < 0:
                return v
        return pairs[-1][1]


# ----------------------------------------------------------------------------------------------
# lexicon

VOWELS = "aeiou"
# polysyllabic verbs stressed on the last syllable, and "quit": final consonant doubles
DOUBLE_FINAL = {"begin", "forget", "admit", "prefer", "occur", "permit", "regret", "submit", "upset", "quit",
                "commit", "control", "refer", "equip", "omit", "compel", "expel", "patrol"}


def _cvc(w):
    """One-syllable consonant-vowel-consonant ending (stop, plan, skip): the consonant doubles."""
    return re.fullmatch(r"[^aeiou]*[aeiou][^aeiouwxy]", w) is not None


def _doubles(w):
    return w in DOUBLE_FINAL or _cvc(w)


def plural(w):
    if re.search(r"(s|x|z|ch|sh)$", w):
        return w + "es"
    if re.search(r"[^aeiou]y$", w):
        return w[:-1] + "ies"
    return w + "s"


def third_person(w):
    if re.search(r"(s|x|z|ch|sh|o)$", w):
        return w + "es"
    if re.search(r"[^aeiou]y$", w):
        return w[:-1] + "ies"
    return w + "s"


def past_regular(w):
    if w.endswith("e"):
        return w + "d"
    if re.search(r"[^aeiou]y$", w):
        return w[:-1] + "ied"
    if _doubles(w):
        return w + w[-1] + "ed"
    return w + "ed"


def present_participle(w):
    if w.endswith("ie"):
        return w[:-2] + "ying"
    if w.endswith("e") and not re.search(r"(ee|oe|ye)$", w) and len(w) > 2:
        return w[:-1] + "ing"
    if _doubles(w):
        return w + w[-1] + "ing"
    return w + "ing"


class Lexicon:
    """words.txt parsed into sections; nouns and verbs get their inflected forms."""

    def __init__(self, path=WORDS_PATH):
        self.path = path
        with open(path, "rb") as f:
            raw = f.read()
        self.sha256 = hashlib.sha256(raw).hexdigest()
        sections = {}
        sec = None
        for ln, line in enumerate(raw.decode("ascii").splitlines(), 1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            m = re.fullmatch(r"\[(\w+)\]", s)
            if m:
                sec = m.group(1)
                sections.setdefault(sec, [])
                continue
            if sec is None:
                raise ValueError(f"{path}:{ln}: entry before any [section]")
            fields = s.split()
            for w in fields:
                if w != "-" and not re.fullmatch(r"[a-z]+", w):
                    raise ValueError(f"{path}:{ln}: '{w}' is not plain lowercase a-z")
            sections[sec].append(fields)
        need = ["noun", "verb", "adj", "adv", "subject", "object", "possessive", "det_singular", "det_plural",
                "prep", "conj", "modal", "aux", "wh", "number", "day", "month"]
        for k in need:
            if not sections.get(k):
                raise ValueError(f"{path}: section [{k}] is missing or empty")
        self.sections = sections
        # nouns: (singular, plural or None)
        self.nouns = []
        for f in sections["noun"]:
            if len(f) == 1:
                self.nouns.append((f[0], plural(f[0])))
            elif f[1] == "-":
                self.nouns.append((f[0], None))
            else:
                self.nouns.append((f[0], f[1]))
        self.count_nouns = [n for n in self.nouns if n[1] is not None]
        # verbs: dict(base, s, past, ing)
        self.verbs = []
        for f in sections["verb"]:
            b = f[0]
            self.verbs.append({"base": b, "s": third_person(b), "past": f[1] if len(f) > 1 else past_regular(b),
                               "ing": present_participle(b)})
        self.adjs = [f[0] for f in sections["adj"]]
        self.advs = [f[0] for f in sections["adv"]]
        self.ly_advs = [a for a in self.advs if a.endswith("ly")]
        self.words = {k: [f[0] for f in v] for k, v in sections.items()}

    def lemma_count(self):
        return len({f[0] for v in self.sections.values() for f in v})

    def surface_forms(self):
        out = set()
        for v in self.sections.values():
            for f in v:
                out.update(w for w in f if w != "-")
        for sg, pl in self.nouns:
            out.add(sg)
            if pl:
                out.add(pl)
        for v in self.verbs:
            out.update(v.values())
        return out


# ----------------------------------------------------------------------------------------------
# numbers as words

ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
ORD_ONES = ["zeroth", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
            "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth", "eighteenth",
            "nineteenth"]
ORD_TENS = ["", "", "twentieth", "thirtieth", "fortieth", "fiftieth", "sixtieth", "seventieth", "eightieth",
            "ninetieth"]


def number_words(n, rng=None, use_and=None):
    """Cardinal 0 <= n < 10^9 in words; 'and' after hundred chosen by rng (British/American)."""
    if n < 0 or n >= 10 ** 9:
        raise ValueError(n)
    if use_and is None:
        use_and = rng.chance(0.5) if rng is not None else False
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return ONES[n // 100] + " hundred" + ("" if rest == 0 else (" and " if use_and else " ") +
                                              number_words(rest, use_and=use_and))
    for size, name in ((10 ** 6, "million"), (1000, "thousand")):
        if n >= size:
            rest = n % size
            head = number_words(n // size, use_and=use_and) + " " + name
            if rest == 0:
                return head
            joiner = " and " if (use_and and rest < 100) else " "
            return head + joiner + number_words(rest, use_and=use_and)
    raise AssertionError(n)


def ordinal_words(n):
    """Ordinal 1..99 in words (first, twenty third, ...)."""
    if n < 20:
        return ORD_ONES[n]
    if n % 10 == 0:
        return ORD_TENS[n // 10]
    return TENS[n // 10] + " " + ORD_ONES[n % 10]


def year_words(y, rng):
    if 2000 <= y <= 2009:
        return "two thousand" + ("" if y == 2000 else (" and " if rng.chance(0.5) else " ") + ONES[y - 2000])
    hi, lo = divmod(y, 100)
    head = number_words(hi)
    if lo == 0:
        return head + " hundred"
    if lo < 10:
        return head + " oh " + ONES[lo]
    return head + " " + number_words(lo)


# ----------------------------------------------------------------------------------------------
# sentences
#
# A sentence is built as a list of word strings; the espeak-ng input joins them with spaces and
# adds punctuation for prosody (",", ".", "?"); the training target is normalize_text() of it.

AN_EXCEPTIONS = {"one", "once", "use", "used", "user", "useful", "usual", "usually", "unit", "union", "unique",
                 "university", "uniform", "universe", "european", "eulogy"}
AN_SILENT_H = {"hour", "honest", "honor", "heir"}


def article(word):
    w = word.split()[0]
    if w in AN_SILENT_H:
        return "an"
    if w[0] in VOWELS and w not in AN_EXCEPTIONS and not w.startswith("uni") and not w.startswith("use"):
        return "an"
    return "a"


class SentenceGenerator:
    SUBJ_SG = ["he", "she", "it"]
    SUBJ_PL = ["we", "you", "they"]

    def __init__(self, lex):
        self.lex = lex
        self.w = lex.words
        self.all_surface = sorted(lex.surface_forms())
        self.time_nouns = ["morning", "afternoon", "evening", "night", "week", "month", "year", "weekend"]

    # --- phrases -----------------------------------------------------------------------------

    def adj_phrase(self, rng):
        r = rng.random()
        if r < 0.55:
            return []
        if r < 0.85:
            return [rng.choice(self.lex.adjs)]
        if r < 0.93:
            return [rng.choice(["very", "quite", "really", "rather", "so", "too"]), rng.choice(self.lex.adjs)]
        return [rng.choice(self.lex.adjs), rng.choice(self.lex.adjs)]

    def noun_phrase(self, rng, plural=None, allow_number=True):
        """Returns (words, is_plural)."""
        if plural is None:
            plural = rng.chance(0.35)
        if plural:
            sg, pl = rng.choice(self.lex.count_nouns)
            adj = self.adj_phrase(rng)
            r = rng.random()
            if allow_number and r < 0.25:
                n = rng.weighted([(5, (2, 12)), (3, (13, 99)), (1, (100, 999))])
                k = rng.range(*n)
                return number_words(k, rng).split() + adj + [pl], True
            if r < 0.55:
                return adj + [pl], True
            return [rng.choice(self.w["det_plural"])] + adj + [pl], True
        sg, pl = rng.choice(self.lex.nouns)
        adj = self.adj_phrase(rng)
        if pl is None:  # mass noun: "the water", "some rice", "water"
            det = rng.choice(["the", "some", "no", "more", "this", "that", "my", "our", "", ""])
            return ([det] if det else []) + adj + [sg], False
        det = rng.choice(self.w["det_singular"])
        if det == "a":
            det = article((adj + [sg])[0])
        return [det] + adj + [sg], False

    def subject(self, rng):
        """Returns (words, person) with person in {'1sg', '3sg', 'pl'}."""
        r = rng.random()
        if r < 0.12:
            return ["i"], "1sg"
        if r < 0.30:
            return [rng.choice(self.SUBJ_SG)], "3sg"
        if r < 0.45:
            return [rng.choice(self.SUBJ_PL)], "pl"
        words, pl = self.noun_phrase(rng)
        return words, ("pl" if pl else "3sg")

    def obj(self, rng):
        if rng.chance(0.2):
            return [rng.choice(self.w["object"])]
        return self.noun_phrase(rng)[0]

    def prep_phrase(self, rng):
        return [rng.choice(self.w["prep"])] + self.noun_phrase(rng, allow_number=False)[0]

    def time_phrase(self, rng):
        r = rng.random()
        if r < 0.2:
            return ["on", rng.choice(self.w["day"])]
        if r < 0.35:
            return ["in", rng.choice(self.w["month"])]
        if r < 0.5:
            return [rng.choice(["every", "last", "next", "this"]), rng.choice(self.time_nouns)]
        if r < 0.62:
            return number_words(rng.range(2, 30)).split() + [rng.choice(["minutes", "hours", "days", "weeks",
                                                                          "years"]), "ago"]
        if r < 0.75:
            return ["at"] + self.clock_time(rng)
        return [rng.choice(["today", "tomorrow", "yesterday", "tonight", "later", "soon", "now", "again"])]

    def clock_time(self, rng):
        h = rng.range(1, 12)
        m = rng.choice([0, 5, 10, 15, 20, 30, 40, 45, 50, rng.range(1, 59)])
        if m == 0:
            words = number_words(h).split() + ([] if rng.chance(0.6) else ["exactly"])
        elif m < 10:
            words = number_words(h).split() + ["oh", ONES[m]]
        else:
            words = number_words(h).split() + number_words(m).split()
        if rng.chance(0.3):
            words += ["in", "the", rng.choice(["morning", "afternoon", "evening"])]
        return words

    def verb_form(self, rng, person, tense=None):
        v = rng.choice(self.lex.verbs)
        if tense is None:
            tense = rng.weighted([(4, "present"), (4, "past"), (2, "modal"), (2, "progressive"), (1, "future")])
        if tense == "past":
            return [v["past"]]
        if tense == "modal":
            return [rng.choice(self.w["modal"])] + (["not"] if rng.chance(0.15) else []) + [v["base"]]
        if tense == "future":
            return ["will", v["base"]] if rng.chance(0.6) else (["am"] if person == "1sg" else ["is"] if person ==
                                                                 "3sg" else ["are"]) + ["going", "to", v["base"]]
        if tense == "progressive":
            be = {"1sg": "am", "3sg": "is", "pl": "are"}[person]
            if rng.chance(0.4):
                be = {"1sg": "was", "3sg": "was", "pl": "were"}[person]
            return [be] + (["not"] if rng.chance(0.1) else []) + [v["ing"]]
        # present
        if rng.chance(0.12):
            do = "does" if person == "3sg" else "do"
            return [do, "not", v["base"]]
        return [v["s"] if person == "3sg" else v["base"]]

    # --- sentence templates ------------------------------------------------------------------

    def s_transitive(self, rng):
        subj, person = self.subject(rng)
        words = subj + self.verb_form(rng, person) + self.obj(rng)
        if rng.chance(0.4):
            words += self.prep_phrase(rng)
        if rng.chance(0.25):
            words += self.time_phrase(rng)
        elif rng.chance(0.15):
            words += [rng.choice(self.lex.advs)]
        return words, "."

    def s_copula(self, rng):
        subj, person = self.subject(rng)
        past = rng.chance(0.4)
        be = {"1sg": "was" if past else "am", "3sg": "was" if past else "is", "pl": "were" if past else "are"}[person]
        r = rng.random()
        if r < 0.6:
            pred = self.adj_phrase(rng) or [rng.choice(self.lex.adjs)]
        elif r < 0.8:
            pred = self.prep_phrase(rng)
        else:
            pred = ["not", rng.choice(self.lex.adjs)]
        return subj + [be] + pred, "."

    def s_there(self, rng):
        pl = rng.chance(0.6)
        np_, pl = self.noun_phrase(rng, plural=pl)
        past = rng.chance(0.4)
        be = ("were" if past else "are") if pl else ("was" if past else "is")
        return ["there", be] + np_ + self.prep_phrase(rng), "."

    def s_question(self, rng):
        r = rng.random()
        v = rng.choice(self.lex.verbs)
        if r < 0.3:
            subj, person = self.subject(rng)
            aux = rng.choice(["did", "does" if person == "3sg" else "do", "can", "will", "should"])
            return [aux] + subj + [v["base"]] + self.obj(rng), "?"
        if r < 0.6:
            subj, person = self.subject(rng)
            aux = rng.choice(["did", "does" if person == "3sg" else "do", "can", "would", "must"])
            return [rng.choice(["where", "when", "why", "how"]), aux] + subj + [v["base"]] + self.obj(rng), "?"
        if r < 0.8:
            sg, pl = rng.choice(self.lex.count_nouns)
            return ["how", "many", pl, rng.choice(["did", "do", "can", "will"]),
                    rng.choice(self.SUBJ_PL + ["i"]), v["base"]], "?"
        np_, pl = self.noun_phrase(rng, allow_number=False)
        return [rng.choice(["what", "where", "who", "which"]), "are" if pl else "is"] + np_, "?"

    def s_imperative(self, rng):
        v = rng.choice(self.lex.verbs)
        words = (["please"] if rng.chance(0.4) else []) + [v["base"]] + self.obj(rng)
        if rng.chance(0.5):
            words += self.prep_phrase(rng)
        if rng.chance(0.2):
            words += [rng.choice(self.lex.ly_advs)]
        return words, rng.choice([".", "!"])

    def s_numbers(self, rng):
        r = rng.random()
        if r < 0.15:
            k = rng.range(2, 999)
            c = rng.range(1, 99)
            return (["it", rng.choice(["costs", "cost"])] + number_words(k, rng).split() + ["dollars"] +
                    (["and"] + number_words(c).split() + ["cents"] if rng.chance(0.5) else [])), "."
        if r < 0.3:
            d = rng.range(1, 31)
            return (["the", rng.choice(["meeting", "party", "concert", "exam", "wedding", "trip"]), "is", "on",
                     rng.choice(self.w["day"]), "the"] + ordinal_words(d).split() + ["of", rng.choice(self.w["month"])]), "."
        if r < 0.42:
            y = rng.range(1900, 2039)
            return (["in"] + year_words(y, rng).split() + self.subject(rng)[0] +
                    [rng.choice(self.lex.verbs)["past"]] + self.obj(rng)), "."
        if r < 0.54:
            digits = [rng.choice(ONES[:10] + ["oh"]) for _ in range(rng.range(4, 8))]
            return ["my", "number", "is"] + digits, "."
        if r < 0.66:
            a, b = rng.range(0, 99), rng.range(1, 9)
            return ["it", "is"] + number_words(a).split() + ["point"] + number_words(b).split() + [
                rng.choice(["degrees", "percent", "meters", "miles", "kilograms"])], "."
        if r < 0.78:
            return ["we", "will", "meet", "at"] + self.clock_time(rng) + self.time_phrase(rng)[:2], "."
        if r < 0.9:
            k = rng.weighted([(3, rng.range(2, 20)), (3, rng.range(21, 999)), (1, rng.range(1000, 999999))])
            sg, pl = rng.choice(self.lex.count_nouns)
            return (number_words(k, rng).split() + [pl, rng.choice(["were", "are"])] + self.prep_phrase(rng)), "."
        return ["page"] + number_words(rng.range(1, 500), rng).split() + ["of", "the", rng.choice(["book", "report",
                                                                                                   "story"])], "."

    def s_said(self, rng):
        subj, person = self.subject(rng)
        rep = rng.choice(["said", "thought", "knew", "believed", "hoped", "felt", "heard", "told", "remembered"])
        extra = self.obj(rng) if rep == "told" else []
        inner, _ = self.s_transitive(rng) if rng.chance(0.6) else self.s_copula(rng)
        return subj + [rep] + extra + ["that"] + inner, "."

    def s_list(self, rng):
        subj, person = self.subject(rng)
        v = rng.choice(self.lex.verbs)["past"]
        items = [self.noun_phrase(rng, allow_number=False)[0] for _ in range(rng.range(2, 4))]
        words = subj + [v]
        for i, it in enumerate(items):
            if i == len(items) - 1:
                words += ["and"]
            elif i > 0:
                words[-1] += ","
            words += it
        return words, "."

    def s_random(self, rng):
        return [rng.choice(self.all_surface) for _ in range(rng.range(3, 14))], "."

    def s_compound(self, rng):
        a, _ = self.s_transitive(rng) if rng.chance(0.5) else self.s_copula(rng)
        b, _ = self.s_transitive(rng) if rng.chance(0.5) else self.s_copula(rng)
        conj = rng.choice(["and", "but", "so", "because", "while", "when", "although", "if", "until", "before",
                           "after", "or"])
        return a + [conj] + b, "."

    TEMPLATES = [(24, "s_transitive"), (11, "s_copula"), (7, "s_there"), (11, "s_question"), (8, "s_imperative"),
                 (13, "s_numbers"), (5, "s_said"), (5, "s_list"), (10, "s_random"), (8, "s_compound")]

    def sentence(self, rng):
        """Returns (espeak_text, target)."""
        name = rng.weighted([(w, n) for w, n in self.TEMPLATES])
        words, end = getattr(self, name)(rng)
        words = [w for w in words if w]
        if len(words) < 3 and name != "s_random":  # pad very short ones with a time phrase
            words += self.time_phrase(rng)
        text = " ".join(words)
        # espeak-ng input: capital letter and final punctuation give natural sentence prosody;
        # commas (lists) give pauses.  The target is the normalised word sequence.
        spoken = text[0].upper() + text[1:] + end
        return spoken, normalize_text(text)


def utterance_parts(gen, rng):
    """One utterance: a sentence, or two when the first is short (about 4 s of speech on average
    at the default rate); returns (espeak_text, target, [target of each sentence])."""
    spoken, target = gen.sentence(rng)
    parts = [target]
    if len(target.split()) < 14 and rng.chance(0.5):
        s2, t2 = gen.sentence(rng)
        spoken, target = spoken + " " + s2, target + " " + t2
        parts.append(t2)
    return spoken, target, parts


def utterance_text(gen, rng):
    """utterance_parts without the parts: (espeak_text, target)."""
    spoken, target, _ = utterance_parts(gen, rng)
    return spoken, target


def normalize_text(s):
    """The training-target and WER normalisation: lowercase; apostrophes removed (dont); every
    other character that is not a-z or a digit becomes a space; single spaces, no edges.
    tests/wer.h implements the same rule in C (plus UTF-8 letters kept as they are)."""
    s = s.lower().replace("'", "").replace("\u2019", "")
    s = re.sub(r"[^a-z0-9]+", " ", s)
    return s.strip()


# ----------------------------------------------------------------------------------------------
# the corpus plan: which sentence, voice and parameters each utterance gets


def synth_params(rng, heldout=False):
    """espeak-ng parameters: rate (words/min), pitch and pitch range (0-99), word gap (10 ms units),
    volume (amplitude, 100 = default)."""
    if heldout:
        rate = rng.range(140, 210)
    else:
        rate = rng.range(115, 235)
    return {
        "rate": rate,
        "pitch": rng.range(20, 80),
        "range": rng.range(15, 90),
        "gap": 0 if rng.chance(0.8) else rng.range(1, 3),
        "volume": rng.range(60, 110),
    }


def train_voice(rng):
    return rng.choice(TRAIN_ACCENTS), rng.choice(TRAIN_VARIANTS)


def heldout_sentences(gen, n, seed=SEED_HELDOUT):
    """n distinct held-out sentences (espeak text, target)."""
    rng = Rng(seed)
    out, seen = [], set()
    while len(out) < n:
        spoken, target = utterance_text(gen, rng)
        if target in seen:
            continue
        seen.add(target)
        out.append((spoken, target))
    return out


class TrainingText:
    """The targets of the first `blocks` training blocks (a superset of any corpus the recipe
    builds: 30 h take about 56 blocks of 512), searchable for word sequences."""

    def __init__(self, gen, blocks=None, block_size=512):
        exclude = {t for _, t in heldout_sentences(gen, HELDOUT_RESERVE)}
        texts = []
        for i in range((blocks or TRAIN_BLOCKS_BOUND) * block_size):
            rng = Rng(SEED_TRAIN * 13 + i)
            while True:  # the loop of train_plan_block
                _, target, _ = utterance_parts(gen, rng)
                if target not in exclude:
                    break
            texts.append(target)
        self.n = len(texts)
        self._joined = "|" + "|".join(f" {t} " for t in texts) + "|"

    def contains(self, words):
        """Whether a training target contains `words` as a whole-word sequence."""
        return f" {words} " in self._joined


def heldout_plan(gen, per_voice, train_text=None):
    """The held-out utterances: per_voice distinct sentences for each HELDOUT_VOICES entry (every
    sentence used once), less those with a sentence that occurs anywhere in a training utterance.
    Training excludes whole held-out utterances only, but half of all utterances join two sentences
    and short sentences recur inside longer ones: 12 of the 550 would repeat a sentence heard in
    training. Dropped utterances leave their ids unused, so ids are stable. train_text: a
    TrainingText(gen), built when None. Returns a list of dicts."""
    if train_text is None:
        train_text = TrainingText(gen)
    rng0 = Rng(SEED_HELDOUT)
    sents, seen_t = [], set()
    while len(sents) < per_voice * len(HELDOUT_VOICES):  # heldout_sentences, keeping the parts
        spoken, target, parts = utterance_parts(gen, rng0)
        if target in seen_t:
            continue
        seen_t.add(target)
        sents.append((spoken, target, parts))
    plan = []
    for vi, (acc, var, seen) in enumerate(HELDOUT_VOICES):
        for j in range(per_voice):
            i = vi * per_voice + j
            rng = Rng(SEED_HELDOUT * 7 + i)
            spoken, target, parts = sents[i]
            if any(train_text.contains(t) for t in parts):
                continue
            plan.append({"id": f"h{i:05d}", "spoken": spoken, "text": target, "sentences": parts,
                         "voice": voice_name(acc, var), "seen_voice": seen, "params": synth_params(rng, heldout=True),
                         "noise_seed": SEED_HELDOUT * 11 + i})
    return plan


# Held-out utterances never occur in training: the training generator skips any target in this
# reserve, which is larger than any held-out set we use (per_voice <= HELDOUT_RESERVE / voices); and
# heldout_plan drops held-out utterances with a sentence that occurs inside a training utterance.
HELDOUT_RESERVE = 4000
TRAIN_BLOCKS_BOUND = 64


def train_plan_block(gen, block, block_size, exclude):
    """Training utterances [block*block_size, (block+1)*block_size): each index has its own seed."""
    plan = []
    for i in range(block * block_size, (block + 1) * block_size):
        rng = Rng(SEED_TRAIN * 13 + i)
        while True:
            spoken, target = utterance_text(gen, rng)
            if target not in exclude:
                break
        acc, var = train_voice(rng)
        plan.append({"id": f"t{i:07d}", "spoken": spoken, "text": target, "voice": voice_name(acc, var),
                     "params": synth_params(rng)})
    return plan


# ----------------------------------------------------------------------------------------------
# espeak-ng through ctypes

AUDIO_OUTPUT_SYNCHRONOUS = 2
POS_CHARACTER = 1
ESPEAK_CHARS_UTF8 = 1
P_RATE, P_VOLUME, P_PITCH, P_RANGE, P_WORDGAP = 1, 2, 3, 4, 7

_CB_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)


class _EspeakVoice(ctypes.Structure):  # espeak_VOICE (speak_lib.h)
    _fields_ = [("name", ctypes.c_char_p), ("languages", ctypes.c_char_p), ("identifier", ctypes.c_char_p),
                ("gender", ctypes.c_ubyte), ("age", ctypes.c_ubyte), ("variant", ctypes.c_ubyte),
                ("xx1", ctypes.c_ubyte), ("score", ctypes.c_int), ("spare", ctypes.c_void_p)]


def espeak_lib_path():
    """VKASR_ESPEAK_LIB (set by espeak_env.sh for the unpacked copy), else the system library."""
    p = os.environ.get("VKASR_ESPEAK_LIB")
    if p:
        return p
    found = ctypes.util.find_library("espeak-ng")
    if not found:
        raise RuntimeError("libespeak-ng not found: install espeak-ng, or source tools/train/espeak_env.sh "
                           "(sets VKASR_ESPEAK_LIB, ESPEAK_DATA_PATH, LD_LIBRARY_PATH)")
    return found


class Espeak:
    """One libespeak-ng instance (the library has global state: one per process)."""

    def __init__(self, lib_path=None):
        lib_path = lib_path or espeak_lib_path()
        self.lib = ctypes.CDLL(lib_path)
        self.lib.espeak_Initialize.restype = ctypes.c_int
        self.lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self.lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        self.lib.espeak_SetVoiceByProperties.argtypes = [ctypes.POINTER(_EspeakVoice)]
        self.lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self.lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int,
                                          ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
        self.lib.espeak_Info.restype = ctypes.c_char_p
        self.lib.espeak_Info.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
        # path NULL: libespeak-ng reads ESPEAK_DATA_PATH (the directory that holds espeak-ng-data),
        # else its compiled-in default
        self.rate = self.lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, None, 0)
        if self.rate != SR_ESPEAK:
            raise RuntimeError(f"espeak_Initialize({lib_path}) returned {self.rate} (expected {SR_ESPEAK} Hz); "
                               "is ESPEAK_DATA_PATH the directory that holds espeak-ng-data?")
        data = ctypes.c_char_p()
        self.version = self.lib.espeak_Info(ctypes.byref(data)).decode()
        self.data_path = data.value.decode() if data.value else "?"
        want = os.environ.get("ESPEAK_DATA_PATH")
        if want and not os.path.realpath(self.data_path).startswith(os.path.realpath(want)):
            raise RuntimeError(f"libespeak-ng uses data at {self.data_path}, not under ESPEAK_DATA_PATH={want}")
        self._chunks = []
        self._cb = _CB_TYPE(self._callback)  # keep a reference: ctypes callbacks must outlive their use
        self.lib.espeak_SetSynthCallback(self._cb)
        self._voice = None

    def _callback(self, wav, n, events):
        if n > 0 and wav:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
        return 0

    def set_voice(self, voice):
        """What the espeak-ng program does with -v VOICE: the voice file of that name, else the
        voice whose language matches (en-gb is the file gmw/en), with an optional +variant."""
        if self.lib.espeak_SetVoiceByName(voice.encode()) != 0:
            sel = _EspeakVoice(None, voice.encode(), None, 0, 0, 0, 0, 0, None)
            if self.lib.espeak_SetVoiceByProperties(ctypes.byref(sel)) != 0:
                raise RuntimeError(f"espeak-ng: unknown voice '{voice}'")
        self._voice = voice

    def synth(self, text, voice, params):
        """int16 samples at 22050 Hz."""
        if voice != self._voice:
            self.set_voice(voice)
        for p, key in ((P_RATE, "rate"), (P_VOLUME, "volume"), (P_PITCH, "pitch"), (P_RANGE, "range"),
                       (P_WORDGAP, "gap")):
            if self.lib.espeak_SetParameter(p, int(params[key]), 0) != 0:
                raise RuntimeError(f"espeak-ng: SetParameter({key}={params[key]}) failed")
        self._chunks = []
        buf = text.encode("utf-8") + b"\0"
        rc = self.lib.espeak_Synth(buf, len(buf), 0, POS_CHARACTER, 0, ESPEAK_CHARS_UTF8, None, None)
        if rc != 0:
            raise RuntimeError(f"espeak_Synth failed ({rc}) for {text!r}")
        self.lib.espeak_Synchronize()
        if not self._chunks:
            return np.zeros(0, np.int16)
        return np.concatenate(self._chunks)


# ----------------------------------------------------------------------------------------------
# signal processing


def _smooth_at_least(n):
    """Smallest k >= n whose prime factors are 2, 3, 5 (fast FFT sizes; 441 * k is then 2-3-5-7)."""
    k = max(1, n)
    while True:
        m = k
        for p in (2, 3, 5):
            while m % p == 0:
                m //= p
        if m == 1:
            return k
        k += 1


_TAPERS = {}


def _taper(n2):
    """Raised-cosine band edge from 7.6 to 8 kHz over the rfft bins of length n2 at 16 kHz (cached)."""
    t = _TAPERS.get(n2)
    if t is None:
        m = n2 // 2 + 1
        f = np.arange(m) * (SR_OUT / n2)
        f1, f2 = 7600.0, 8000.0
        t = np.where(f <= f1, 1.0, np.where(f >= f2, 0.0, 0.5 * (1 + np.cos(np.pi * (f - f1) / (f2 - f1)))))
        t = t * (n2 / (441.0 * (n2 // 320)))  # amplitude: irfft length n2 of an rfft of length n1 = 441 k
        if len(_TAPERS) > 64:
            _TAPERS.clear()
        _TAPERS[n2] = t
    return t


def resample_22050_to_16000(x):
    """Band-limited resampling by FFT (ratio 320/441): zero-pad to a fast length 441*k, keep the
    spectrum below 8 kHz with a raised-cosine taper from 7.6 to 8 kHz (avoids ringing), inverse FFT
    of length 320*k.  The zero padding (>= 2048 samples) keeps the circular wrap in silence."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    if n == 0:
        return np.zeros(0, np.float32)
    k = _smooth_at_least(-(-(n + 2048) // 441))
    n1, n2 = 441 * k, 320 * k
    X = np.fft.rfft(x, n=n1)
    y = np.fft.irfft(X[:n2 // 2 + 1] * _taper(n2), n=n2)
    out_len = int(round(n * SR_OUT / SR_ESPEAK))
    return y[:out_len].astype(np.float32)


def trim_silence(x, thresh=1e-4, keep=0.06):
    """Cut leading/trailing near-silence beyond `keep` seconds (espeak-ng pads both ends)."""
    nz = np.flatnonzero(np.abs(x) > thresh)
    if nz.size == 0:
        return x[:0]
    pad = int(keep * SR_OUT)
    return x[max(0, nz[0] - pad): min(x.shape[0], nz[-1] + 1 + pad)]


def to_int16(x):
    return np.clip(np.round(x * 32767.0), -32768, 32767).astype(np.int16)


def heldout_degrade(x, seed):
    """Light noise and a gain change, fixed per clip: white noise at 25-40 dB SNR (relative to the
    clip's RMS), peak level -20 to -3 dBFS."""
    g = np.random.Generator(np.random.PCG64(seed))
    x = x.astype(np.float64)
    rms = math.sqrt(float(np.mean(x * x))) if x.size else 0.0
    snr_db = 25.0 + 15.0 * g.random()
    noise = g.standard_normal(x.shape[0]) * (rms / (10 ** (snr_db / 20)))
    y = x + noise
    peak = float(np.max(np.abs(y))) if y.size else 0.0
    target = 10 ** ((-20.0 + 17.0 * g.random()) / 20)
    if peak > 0:
        y *= target / peak
    return y.astype(np.float32)


def render(es, item):
    """Synthesises one planned utterance: float32 16 kHz, peak-normalised to 0.9 (training; the
    training loop applies random gain and noise on the GPU)."""
    raw = es.synth(item["spoken"], item["voice"], item["params"])
    clipped = int(np.count_nonzero(np.abs(raw.astype(np.int32)) >= 32767))
    x = resample_22050_to_16000(raw.astype(np.float64) / 32768.0)
    x = trim_silence(x)
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    if peak > 0:
        x = x * (0.9 / peak)
    return x.astype(np.float32), clipped


# ----------------------------------------------------------------------------------------------
# parallel build with a block cache

_ES = None


def _worker_init():
    global _ES
    _ES = Espeak()


def _worker_block(job):
    """Synthesises a block of planned utterances into DIR/block_NNNNN.{npy,json}; returns the metadata."""
    out_dir, name, plan = job
    audio, meta = [], []
    for item in plan:
        x, clipped = render(_ES, item)
        if "noise_seed" in item:
            x = heldout_degrade(x, item["noise_seed"])
        n = x.shape[0]
        keep = MIN_SECONDS * SR_OUT <= n <= MAX_SECONDS * SR_OUT
        m = dict(item)
        m.update({"samples": int(n), "keep": bool(keep), "espeak_clipped": clipped})
        meta.append(m)
        if keep:
            audio.append(to_int16(x))
    arr = np.concatenate(audio) if audio else np.zeros(0, np.int16)
    tmp = os.path.join(out_dir, name + ".tmp.npy")
    np.save(tmp, arr)
    os.replace(tmp, os.path.join(out_dir, name + ".npy"))
    with open(os.path.join(out_dir, name + ".json.tmp"), "w") as f:
        json.dump(meta, f)
    os.replace(os.path.join(out_dir, name + ".json.tmp"), os.path.join(out_dir, name + ".json"))
    return name, meta


def cache_key(kind, **cfg):
    lex = Lexicon()
    h = hashlib.sha256(json.dumps({"v": CORPUS_VERSION, "kind": kind, "words": lex.sha256, "cfg": cfg,
                                   "src": hashlib.sha256(open(__file__, "rb").read()).hexdigest()},
                                  sort_keys=True).encode()).hexdigest()
    return h[:16]


def default_workers():
    """CPUs this process may use, minus one, at most 32 (some sandboxes report the host's count)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 2
    return max(1, min(32, n - 1))


def _pool(workers):
    """Worker processes, one per block (maxtasksperchild=1): libespeak-ng keeps synthesis state
    across utterances in a process (pitch flutter and waveform phase carry over, so the same text
    renders slightly differently after other text), and a fresh process per block makes each
    block's audio depend on the block alone, not on which worker ran what before."""
    import multiprocessing as mp

    return mp.get_context("spawn").Pool(workers, initializer=_worker_init, maxtasksperchild=1)


def build(out_root, kind, hours=None, per_voice=None, workers=None, block_size=512, log=print):
    """Generates (or reuses) a corpus directory; returns its path.

    kind 'train': the shortest prefix of training blocks whose kept audio reaches `hours`.
    kind 'heldout': heldout_plan(per_voice).
    The directory holds block_NNNNN.npy (int16, kept utterances concatenated), block_NNNNN.json
    (metadata of every planned utterance, kept or not) and DONE when complete."""
    workers = workers or default_workers()
    cfg = {"hours": hours, "block": block_size} if kind == "train" else {"per_voice": per_voice}
    d = os.path.join(out_root, f"{kind}-{cache_key(kind, **cfg)}")
    if os.path.exists(os.path.join(d, "DONE")):
        log(f"corpus: reusing {d}")
        return d
    os.makedirs(d, exist_ok=True)
    t0 = time.time()
    lex = Lexicon()
    gen = SentenceGenerator(lex)
    if kind == "heldout":
        # fixed small blocks: every machine cuts the held-out set the same way (a clip's audio depends
        # on the clips synthesised before it in its block, see _pool), and many workers share the work
        plan = heldout_plan(gen, per_voice)
        b = HELDOUT_BLOCK
        jobs = [(d, f"block_{i // b:05d}", plan[i:i + b]) for i in range(0, len(plan), b)]
        with _pool(min(workers, len(jobs))) as pool:
            list(pool.imap(_worker_block, jobs))
        names = [j[1] for j in jobs]
    else:
        exclude = {t for _, t in heldout_sentences(gen, HELDOUT_RESERVE)}
        target = hours * 3600.0 * SR_OUT
        # blocks are submitted ahead (at most 2 per worker in flight) and consumed in order; the corpus
        # is the shortest prefix of blocks whose kept audio reaches `hours`, whatever the timing
        names, total, pending, nxt = [], 0, {}, 0
        with _pool(workers) as pool:
            while True:
                while len(pending) < 2 * workers:
                    job = (d, f"block_{nxt:05d}", train_plan_block(gen, nxt, block_size, exclude))
                    pending[nxt] = pool.apply_async(_worker_block, (job,))
                    nxt += 1
                name, meta = pending.pop(len(names)).get()
                names.append(name)
                total += sum(m["samples"] for m in meta if m["keep"])
                if len(names) % 8 == 0 or total >= target:
                    log(f"corpus: {len(names)} blocks, {total / SR_OUT / 3600:.2f} h ({time.time() - t0:.0f} s)")
                if total >= target:
                    break
            pool.terminate()
        # blocks beyond the prefix may have been written by workers that ran ahead: remove them
        keep = set(names)
        for f in os.listdir(d):
            if f.startswith("block_") and f.split(".")[0] not in keep:
                os.remove(os.path.join(d, f))
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump({"kind": kind, "blocks": names, "cfg": cfg, "corpus_version": CORPUS_VERSION}, f)
    open(os.path.join(d, "DONE"), "w").close()
    log(f"corpus: {kind} ready in {d} ({time.time() - t0:.1f} s)")
    return d


def load(d):
    """Returns (audio int16 [N], offsets int64 [n+1], meta list of kept utterances)."""
    with open(os.path.join(d, "index.json")) as f:
        idx = json.load(f)
    arrays, meta = [], []
    for name in idx["blocks"]:
        a = np.load(os.path.join(d, name + ".npy"))
        with open(os.path.join(d, name + ".json")) as f:
            m = [x for x in json.load(f) if x["keep"]]
        if sum(x["samples"] for x in m) != a.shape[0]:
            raise RuntimeError(f"{d}/{name}: audio length does not match its metadata")
        arrays.append(a)
        meta.extend(m)
    audio = np.concatenate(arrays) if arrays else np.zeros(0, np.int16)
    lens = np.array([m["samples"] for m in meta], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lens)])
    return audio, offsets, meta


# ----------------------------------------------------------------------------------------------
# WAV I/O and checks


def write_wav(path, x):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR_OUT)
        w.writeframes((x if x.dtype == np.int16 else to_int16(x)).astype("<i2").tobytes())


def read_wav(path):
    with wave.open(path, "rb") as w:
        ch, width, rate, n = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
        raw = w.readframes(n)
    return ch, width, rate, np.frombuffer(raw, dtype="<i2")


def write_clip_dir(out, items, audio_of):
    """WAVs + refs.tsv (file, voice, seen, text)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "refs.tsv"), "w") as f:
        f.write("file\tvoice\tseen_voice\ttext\n")
        for m in items:
            name = m["id"] + ".wav"
            write_wav(os.path.join(out, name), audio_of(m))
            f.write(f"{name}\t{m['voice']}\t{int(m.get('seen_voice', True))}\t{m['text']}\n")


def check_dir(d):
    """Listen-free checks: 16 kHz mono 16-bit, 0.8-10 s, no clipping, not silent, speech-like
    energy; returns a list of problems (empty = fine) and prints statistics."""
    problems, durs, peaks, rms_db = [], [], [], []
    files = sorted(f for f in os.listdir(d) if f.endswith(".wav"))
    if not files:
        return [f"{d}: no .wav files"]
    for fn in files:
        ch, width, rate, x = read_wav(os.path.join(d, fn))
        if (ch, width, rate) != (1, 2, SR_OUT):
            problems.append(f"{fn}: channels={ch} bytes={width} rate={rate}")
            continue
        dur = x.shape[0] / SR_OUT
        durs.append(dur)
        xf = x.astype(np.float64) / 32768.0
        peak = float(np.max(np.abs(xf))) if x.size else 0.0
        peaks.append(peak)
        if not (MIN_SECONDS <= dur <= MAX_SECONDS):
            problems.append(f"{fn}: duration {dur:.2f} s")
        if np.count_nonzero(np.abs(x.astype(np.int32)) >= 32767) > 0:
            problems.append(f"{fn}: clipped samples")
        r = math.sqrt(float(np.mean(xf * xf))) if x.size else 0.0
        rms_db.append(20 * math.log10(r + 1e-12))
        if r < 1e-4:
            problems.append(f"{fn}: silent (rms {r:.2e})")
        # speech-like: 20 ms frame energies span > 20 dB (pauses vs. vowels)
        fr = xf[: x.shape[0] // 320 * 320].reshape(-1, 320)
        e = 10 * np.log10(np.mean(fr * fr, axis=1) + 1e-12)
        if dur >= 1.5 and np.percentile(e, 95) - np.percentile(e, 10) < 15:
            problems.append(f"{fn}: flat energy envelope ({np.percentile(e, 95) - np.percentile(e, 10):.1f} dB)")
    durs = np.array(durs)
    print(f"{d}: {len(files)} files, {durs.sum() / 60:.1f} min; duration min/mean/max "
          f"{durs.min():.2f}/{durs.mean():.2f}/{durs.max():.2f} s; peak max {max(peaks):.3f}; "
          f"rms {min(rms_db):.1f}..{max(rms_db):.1f} dBFS; problems: {len(problems)}")
    return problems


# ----------------------------------------------------------------------------------------------
# self-test (no espeak needed)


def selftest():
    lex = Lexicon()
    surface = lex.surface_forms()
    assert lex.lemma_count() >= 2000, lex.lemma_count()
    vb = {v["base"]: v for v in lex.verbs}
    expect = {"stop": ("stops", "stopped", "stopping"), "make": ("makes", "made", "making"),
              "try": ("tries", "tried", "trying"), "go": ("goes", "went", "going"),
              "die": ("dies", "died", "dying"), "see": ("sees", "saw", "seeing"), "visit": ("visits", "visited",
                                                                                          "visiting"),
              "begin": ("begins", "began", "beginning"), "fix": ("fixes", "fixed", "fixing"),
              "play": ("plays", "played", "playing"), "agree": ("agrees", "agreed", "agreeing"),
              "quit": ("quits", "quit", "quitting"), "ski": ("skis", "skied", "skiing"),
              "wash": ("washes", "washed", "washing"), "open": ("opens", "opened", "opening")}
    for b, (s, p, g) in expect.items():
        got = (vb[b]["s"], vb[b]["past"], vb[b]["ing"])
        assert got == (s, p, g), (b, got)
    nouns = dict(lex.nouns)
    for sg, pl in {"box": "boxes", "city": "cities", "day": "days", "child": "children", "knife": "knives",
                   "water": None, "bus": "buses", "potato": "potatoes", "photo": "photos"}.items():
        assert nouns[sg] == pl, (sg, nouns[sg])
    assert number_words(0) == "zero" and number_words(21) == "twenty one"
    assert number_words(105, use_and=True) == "one hundred and five"
    assert number_words(105, use_and=False) == "one hundred five"
    assert number_words(2023, use_and=False) == "two thousand twenty three"
    assert number_words(1000005, use_and=True) == "one million and five"
    assert ordinal_words(23) == "twenty third" and ordinal_words(30) == "thirtieth"
    r = Rng(5)
    assert year_words(1984, r) == "nineteen eighty four" and year_words(1905, r) == "nineteen oh five"
    assert article("apple") == "an" and article("university") == "a" and article("hour") == "an"
    assert normalize_text("Hello,  World! It's 3-d") == "hello world its 3 d"
    gen = SentenceGenerator(lex)
    # determinism and vocabulary: every target word is a known surface form
    a = [gen.sentence(Rng(SEED_TRAIN * 13 + i)) for i in range(2000)]
    b = [gen.sentence(Rng(SEED_TRAIN * 13 + i)) for i in range(2000)]
    assert a == b
    unknown = {w for _, t in a for w in t.split() if w not in surface}
    assert not unknown, sorted(unknown)[:20]
    lens = np.array([len(t.split()) for _, t in a])
    assert 3 <= lens.min() and lens.mean() > 6 and lens.max() <= 45, (lens.min(), lens.mean(), lens.max())
    # split: held-out sentences never in the training plan
    exclude = {t for _, t in heldout_sentences(gen, HELDOUT_RESERVE)}
    tr = train_plan_block(gen, 0, 3000, exclude)
    tr_text = TrainingText(gen, blocks=6)  # 3072 utterances: covers tr
    ho = heldout_plan(gen, 20, train_text=tr_text)
    assert all(p["text"] in exclude for p in ho)
    assert not ({p["text"] for p in tr} & {p["text"] for p in ho})
    # no held-out sentence occurs inside a training utterance (not only whole texts)
    assert all(f" {s} " not in f" {t['text']} " for p in ho for s in p["sentences"] for t in tr)
    used_variants = {p["voice"].split("+")[1] if "+" in p["voice"] else "" for p in tr}
    used_accents = {p["voice"].split("+")[0] for p in tr}
    assert not (used_variants & set(HELDOUT_ONLY_VARIANTS)) and not (used_accents & set(HELDOUT_ONLY_ACCENTS))
    for acc, var, seen in HELDOUT_VOICES:
        assert seen == (acc in TRAIN_ACCENTS and var in TRAIN_VARIANTS), (acc, var, seen)
    # resampler: a 1 kHz and a 7 kHz sine keep frequency and amplitude; length ratio 320/441
    t = np.arange(22050) / 22050.0
    for fr in (1000.0, 7000.0):
        y = resample_22050_to_16000(0.5 * np.sin(2 * np.pi * fr * t))
        assert y.shape[0] == 16000
        ref = 0.5 * np.sin(2 * np.pi * fr * np.arange(16000) / 16000.0)
        err = np.max(np.abs(y[800:-800] - ref[800:-800]))
        assert err < 2e-3, (fr, err)
    y = resample_22050_to_16000(0.5 * np.sin(2 * np.pi * 9500.0 * t))  # above 8 kHz: removed
    assert np.max(np.abs(y[800:-800])) < 1e-3
    print(f"corpus selftest ok: {lex.lemma_count()} lemmas, {len(surface)} surface forms, "
          f"{len(lex.nouns)} nouns, {len(lex.verbs)} verbs, {len(lex.adjs)} adjectives; "
          f"mean sentence {lens.mean():.1f} words")


# ----------------------------------------------------------------------------------------------
# CLI


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("text")
    p.add_argument("--n", type=int, default=20)
    p.add_argument("--heldout", action="store_true")
    p = sub.add_parser("sample")
    p.add_argument("--out", required=True)
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--workers", type=int, default=None)
    p = sub.add_parser("heldout")
    p.add_argument("--out", required=True)
    p.add_argument("--per-voice", type=int, default=50)
    p.add_argument("--only", default=None, help="comma-separated utterance ids to write (e.g. for CI clips)")
    p.add_argument("--workers", type=int, default=None)
    p = sub.add_parser("check")
    p.add_argument("dir")
    p = sub.add_parser("build")
    p.add_argument("--out", required=True)
    p.add_argument("--hours", type=float, default=30.0)
    p.add_argument("--workers", type=int, default=None)
    sub.add_parser("selftest")
    a = ap.parse_args(argv)

    if a.cmd == "selftest":
        selftest()
        return 0
    if a.cmd == "text":
        gen = SentenceGenerator(Lexicon())
        if a.heldout:
            for p in heldout_plan(gen, max(1, a.n // len(HELDOUT_VOICES)))[: a.n]:
                print(f"{p['voice']:<22} {p['text']}")
        else:
            for p in train_plan_block(gen, 0, a.n, set()):
                print(f"{p['voice']:<22} {p['spoken']}")
        return 0
    if a.cmd == "check":
        probs = check_dir(a.dir)
        for x in probs[:50]:
            print("  " + x)
        return 1 if probs else 0
    if a.cmd == "build":
        build(a.out, "train", hours=a.hours, workers=a.workers)
        return 0
    if a.cmd in ("sample", "heldout"):
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            if a.cmd == "sample":
                gen = SentenceGenerator(Lexicon())
                plan = train_plan_block(gen, 0, a.n, set())
                for p in plan:  # distinct ids from the real corpus
                    p["id"] = "s" + p["id"][1:]
                block = 256
                jobs = [(tmp, f"block_{i // block:05d}", plan[i:i + block]) for i in range(0, len(plan), block)]
                with _pool(min(a.workers or default_workers(), len(jobs))) as pool:
                    list(pool.imap(_worker_block, jobs))
                with open(os.path.join(tmp, "index.json"), "w") as f:
                    json.dump({"blocks": [j[1] for j in jobs]}, f)
                d = tmp
            else:
                d = build(tmp, "heldout", per_voice=a.per_voice, workers=a.workers)
            audio, offsets, meta = load(d)
            pos = {m["id"]: i for i, m in enumerate(meta)}
            items = meta
            if getattr(a, "only", None):
                want = a.only.split(",")
                missing = [w for w in want if w not in pos]
                if missing:
                    raise SystemExit(f"corpus.py heldout --only: unknown ids {missing}")
                items = [meta[pos[w]] for w in want]
            write_clip_dir(a.out, items, lambda m: audio[offsets[pos[m["id"]]]:offsets[pos[m["id"]] + 1]])
            print(f"wrote {len(items)} clips + refs.tsv to {a.out}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
