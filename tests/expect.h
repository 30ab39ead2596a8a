/* expect.h — the check macro of the plain-C test executables: EXPECT(cond, fmt, ...) counts a check
 * and, when cond is false, a failure, printing file:line, the condition and the message. Each test
 * program includes it once and ends with `return failures ? 1 : 0` (after printing the counts). */
#ifndef VKASR_TEST_EXPECT_H
#define VKASR_TEST_EXPECT_H

#include <stdio.h>

static int failures, checks;

#define EXPECT(cond, ...)                                                                              \
    do {                                                                                               \
        checks++;                                                                                      \
        if (!(cond)) {                                                                                 \
            failures++;                                                                                \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                     \
            printf(__VA_ARGS__);                                                                       \
            printf("\n");                                                                              \
        }                                                                                              \
    } while (0)

#endif
