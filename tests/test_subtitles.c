/* test_subtitles.c — the subtitle cue maker (vkasr_subtitle_cues, vkasr_subtitles) on word lists written
 * by hand: each expected file follows from the rules of vkasr.h's "Subtitles" section, worked out in
 * the comments, not from running the code. Host only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "vkasr.h"

#define W(t, s, e) {.text = (t), .start = (s), .end = (e)}
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The file vkasr_subtitles() writes for the words, compared with `want`. */
static void expect_file(const char *name, const vkasr_word *w, size_t n, const vkasr_subtitle_params *p,
                        vkasr_subtitle_format fmt, const char *want) {
    char *got = NULL;
    size_t len = 0;
    vkasr_error err;
    vkasr_status st = vkasr_subtitles(w, n, p, fmt, &got, &len, &err);
    EXPECT(st == VKASR_OK, "%s: %s", name, err.message);
    EXPECT(got && len == strlen(got) && !strcmp(got, want), "%s:\n--- got ---\n%s--- want ---\n%s", name,
           got ? got : "(null)", want);
    vkasr_free(got);
}

/* Sentence ends close cues; a short cue lasts min(1 s, the time to the next cue). */
static void test_sentences(void) {
    const vkasr_word w[] = {W("Hello", 0.0, 0.4), W("there.", 0.5, 0.9), W("How", 1.0, 1.2), W("are", 1.25, 1.4),
                            W("you?", 1.45, 1.8)};
    /* "Hello there." 0-0.9, lengthened to min(0 + 1, 1.0) = 1.0; "How are you?" 1.0-1.8 to 2.0 */
    expect_file("sentences", w, N(w), NULL, VKASR_SUBTITLE_SRT,
                "1\n00:00:00,000 --> 00:00:01,000\nHello there.\n\n"
                "2\n00:00:01,000 --> 00:00:02,000\nHow are you?\n\n");
    expect_file("sentences vtt", w, N(w), NULL, VKASR_SUBTITLE_VTT,
                "WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nHello there.\n\n"
                "00:00:01.000 --> 00:00:02.000\nHow are you?\n\n");
}

/* A silence of at least `pause` (0.5 s) starts a cue; a longer pause setting keeps the words together. */
static void test_pause(void) {
    const vkasr_word w[] = {W("one", 0.0, 0.3), W("two", 0.4, 0.7), W("three", 1.3, 1.6)};
    /* gap 0.6 before "three": two cues; the first lasts until min(0 + 1, 1.3) = 1.0, the second 1.3-2.3 */
    expect_file("pause", w, N(w), NULL, VKASR_SUBTITLE_SRT,
                "1\n00:00:00,000 --> 00:00:01,000\none two\n\n"
                "2\n00:00:01,300 --> 00:00:02,300\nthree\n\n");
    vkasr_subtitle_params p = vkasr_subtitle_params_default();
    p.pause = 0.7;
    expect_file("pause 0.7", w, N(w), &p, VKASR_SUBTITLE_SRT, "1\n00:00:00,000 --> 00:00:01,600\none two three\n\n");
    /* the next cue starts 0.6 s after the first word: the first ends there, not at 0 + 1 */
    const vkasr_word v[] = {W("a", 0.0, 0.2), W("b", 0.8, 0.9)};
    expect_file("min duration clipped", v, N(v), NULL, VKASR_SUBTITLE_SRT,
                "1\n00:00:00,000 --> 00:00:00,800\na\n\n2\n00:00:00,800 --> 00:00:01,800\nb\n\n");
}

/* 14 words, 0.3 s each every 0.35 s (4.85 s in all), one cue of two lines broken near the middle. */
static void test_two_lines(void) {
    const char *t[] = {"the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "and", "then", "runs",
                       "far", "away"};
    vkasr_word w[14];
    for (size_t i = 0; i < 14; i++)
        w[i] = (vkasr_word){.text = t[i], .start = 0.35 * (double)i, .end = 0.35 * (double)i + 0.3};
    /* 53 letters + 13 spaces = 66 characters. First lines: ... "over" 30 (second 35, off by 5), "the" 34
     * (second 31, off by 3), "lazy" 39 (26, off by 13): the break after the second "the" */
    expect_file("two lines", w, 14, NULL, VKASR_SUBTITLE_SRT,
                "1\n00:00:00,000 --> 00:00:04,850\nthe quick brown fox jumps over the\nlazy dog and then runs far "
                "away\n\n");
    /* "over," makes 67 characters: after it 31 | 35 (off by 4, less 42 / 4 = 10 for the comma: -6) beats
     * after "the" 35 | 31 (off by 4) */
    w[5].text = "over,";
    expect_file("two lines, comma", w, 14, NULL, VKASR_SUBTITLE_SRT,
                "1\n00:00:00,000 --> 00:00:04,850\nthe quick brown fox jumps over,\nthe lazy dog and then runs far "
                "away\n\n");
    /* a tie (aa | bbb cc and aa bbb | cc both off by 4) goes to the shorter first line */
    vkasr_subtitle_params p = vkasr_subtitle_params_default();
    p.max_line_chars = 6;
    expect_file("tie", w, 0, &p, VKASR_SUBTITLE_SRT, "");
    const vkasr_word v[] = {W("aa", 0.0, 0.5), W("bbb", 0.5, 1.0), W("cc", 1.0, 1.5)};
    expect_file("tie", v, N(v), &p, VKASR_SUBTITLE_SRT, "1\n00:00:00,000 --> 00:00:01,500\naa\nbbb cc\n\n");
}

/* One line of 12 at most: cues fill up to the limit, ending at a comma when it closes half the text. */
static void test_full(void) {
    vkasr_subtitle_params p = vkasr_subtitle_params_default();
    p.max_line_chars = 12;
    p.max_lines = 1;
    p.min_duration = 0;
    /* "aa bb, cc dd" is 12; with "ee" 15: full. "aa bb," (6) is half of 12: the cue ends there. Then
     * "cc dd ee ff" (11), "gg" would make 14: full, no comma. Then "gg". */
    const vkasr_word w[] = {W("aa", 0.0, 0.2), W("bb,", 0.25, 0.45), W("cc", 0.5, 0.7), W("dd", 0.75, 0.95),
                            W("ee", 1.0, 1.2), W("ff", 1.25, 1.45), W("gg", 1.5, 1.7)};
    expect_file("full", w, N(w), &p, VKASR_SUBTITLE_SRT,
                "1\n00:00:00,000 --> 00:00:00,450\naa bb,\n\n"
                "2\n00:00:00,500 --> 00:00:01,450\ncc dd ee ff\n\n"
                "3\n00:00:01,500 --> 00:00:01,700\ngg\n\n");
    /* "a," closes 2 of "a, bbbb cccc"'s 12 characters, less than half: the cue fills up */
    const vkasr_word v[] = {W("a,", 0.0, 0.2), W("bbbb", 0.25, 0.45), W("cccc", 0.5, 0.7), W("dddd", 0.75, 0.95)};
    expect_file("early comma", v, N(v), &p, VKASR_SUBTITLE_SRT,
                "1\n00:00:00,000 --> 00:00:00,700\na, bbbb cccc\n\n2\n00:00:00,750 --> 00:00:00,950\ndddd\n\n");
    /* a word longer than a line is a cue of its own, never split */
    p.max_line_chars = 5;
    const vkasr_word u[] = {W("abcdefgh", 0.0, 0.5), W("ab", 0.5, 0.6), W("cd", 0.6, 0.7)};
    expect_file("long word", u, N(u), &p, VKASR_SUBTITLE_SRT,
                "1\n00:00:00,000 --> 00:00:00,500\nabcdefgh\n\n2\n00:00:00,500 --> 00:00:00,700\nab cd\n\n");
}

/* Words of 1 s every 1.1 s: a cue holds words while it lasts 7 s at most. */
static void test_duration(void) {
    char names[10][4];
    vkasr_word w[10];
    for (int i = 0; i < 10; i++) {
        snprintf(names[i], sizeof names[i], "w%d", i);
        w[i] = (vkasr_word){.text = names[i], .start = 1.1 * i, .end = 1.1 * i + 1.0};
    }
    /* w5 ends at 6.5 (6.5 s), w6 at 7.6 (7.6 s > 7): w0..w5, then w6..w9 from 6.6 to 10.9 (4.3 s) */
    expect_file("duration", w, 10, NULL, VKASR_SUBTITLE_SRT,
                "1\n00:00:00,000 --> 00:00:06,500\nw0 w1 w2 w3 w4 w5\n\n"
                "2\n00:00:06,600 --> 00:00:10,900\nw6 w7 w8 w9\n\n");
    vkasr_cue *c = NULL;
    size_t n = 0;
    vkasr_error err;
    EXPECT(vkasr_subtitle_cues(w, 10, NULL, &c, &n, &err) == VKASR_OK && n == 2, "cues: %s", err.message);
    EXPECT(n == 2 && c[0].first_word == 0 && c[0].n_words == 6 && c[1].first_word == 6 && c[1].n_words == 4,
           "the cues' words");
    vkasr_cues_free(c, n);
}

/* Text: controls become spaces, bad UTF-8 U+FFFD; WebVTT escapes markup, SubRip does not. */
static void test_text(void) {
    const vkasr_word w[] = {W("a\x01" "b", 0.0, 0.5), W("\xff", 0.5, 0.6), W("<i>&", 0.6, 1.0), W("\xc3\xa9t\xc3\xa9", 1.0, 1.2)};
    expect_file("text vtt", w, N(w), NULL, VKASR_SUBTITLE_VTT,
                "WEBVTT\n\n00:00:00.000 --> 00:00:01.200\na b \xef\xbf\xbd &lt;i&gt;&amp; \xc3\xa9t\xc3\xa9\n\n");
    expect_file("text srt", w, N(w), NULL, VKASR_SUBTITLE_SRT,
                "1\n00:00:00,000 --> 00:00:01,200\na b \xef\xbf\xbd <i>& \xc3\xa9t\xc3\xa9\n\n");
    /* a cue of empty words only is left out (its blank text line would end the cue early) */
    const vkasr_word e[] = {W("", 0.0, 0.2), W("a", 1.0, 1.2)};
    expect_file("empty words", e, N(e), NULL, VKASR_SUBTITLE_SRT, "1\n00:00:01,000 --> 00:00:02,000\na\n\n");
    /* characters, not bytes: 14 two-byte letters and a space fit one line of 15 */
    vkasr_subtitle_params p = vkasr_subtitle_params_default();
    p.max_line_chars = 15;
    p.max_lines = 1;
    const vkasr_word v[] = {W("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 0, 0.5),
                            W("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 0.5, 1.0)};
    vkasr_cue *c = NULL;
    size_t n = 0;
    vkasr_error err;
    EXPECT(vkasr_subtitle_cues(v, 2, &p, &c, &n, &err) == VKASR_OK && n == 1, "two-byte letters: %zu cues", n);
    vkasr_cues_free(c, n);
}

static void expect_refused(const char *name, const vkasr_word *w, size_t n, const vkasr_subtitle_params *p,
                           const char *needle) {
    vkasr_cue *c = NULL;
    size_t nc = 0;
    vkasr_error err;
    vkasr_status st = vkasr_subtitle_cues(w, n, p, &c, &nc, &err);
    EXPECT(st == VKASR_ERR_INVALID_ARG && strstr(err.message, needle) && !c, "%s: %s (%s)", name,
           vkasr_status_string(st), err.message);
    vkasr_cues_free(c, nc);
}

static void test_refused(void) {
    const vkasr_word w[] = {W("a", 1.0, 1.5), W("b", 0.5, 0.6)};
    vkasr_subtitle_params p = vkasr_subtitle_params_default();
    expect_refused("order", w, 2, &p, "word 1 ('b')");
    const vkasr_word v[] = {W("a", 1.0, 0.5)};
    expect_refused("end before start", v, 1, &p, "word 0 ('a')");
    p.max_lines = 3;
    expect_refused("max_lines", w, 0, &p, "max_lines 3");
    p = vkasr_subtitle_params_default();
    p.min_duration = 8;
    expect_refused("min_duration", w, 0, &p, "min_duration 8");
    p = vkasr_subtitle_params_default();
    p.max_line_chars = 0;
    expect_refused("max_line_chars", w, 0, &p, "max_line_chars 0");
}

int main(void) {
    test_sentences();
    test_pause();
    test_two_lines();
    test_full();
    test_duration();
    test_text();
    test_refused();
    printf("test_subtitles: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
