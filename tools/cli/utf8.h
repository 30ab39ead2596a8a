/* utf8.h — one UTF-8 decoder for the CLI (JSON and cue escaping in output.c, WER normalisation). */
#ifndef VKASR_CLI_UTF8_H
#define VKASR_CLI_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the well-formed UTF-8 sequence at s, n bytes available, and its code point in *cp;
 * 0 when there is none (stray continuation byte, overlong form, surrogate, beyond U+10FFFF, truncated).
 * A NUL ends a sequence, so a NUL-terminated string may pass n = 4. */
size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

#endif
