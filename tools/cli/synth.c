/* synth.c — the synthetic speech-like audio of `vkasr bench` (whole transcriptions and --streams): no
 * files needed, the same samples for the same seed on every machine. */
#include <math.h>

#include "cli.h"

void synth_speech(float *x, size_t n, uint64_t seed) {
    const double rate = VKASR_SAMPLE_RATE, two_pi = 6.283185307179586;
    uint64_t s = 0x9e3779b97f4a7c15ull ^ seed;
    double phase = 0.0;
    for (size_t i = 0; i < n; i++) {
        double t = (double)i / rate;
        double f0 = 120.0 + 30.0 * sin(two_pi * 0.7 * t) + 10.0 * sin(two_pi * 3.1 * t);
        phase += two_pi * f0 / rate;
        if (phase > two_pi)
            phase -= two_pi;
        double syl = sin(two_pi * 4.0 * t), env = syl > 0 ? syl * syl : 0.0;
        if (fmod(t, 3.0) >= 2.5)
            env = 0.0;
        double v = 0.0;
        for (int h = 1; h <= 10; h++)
            v += sin(h * phase) / h * (1.0 + 0.5 * sin(two_pi * (0.3 + 0.1 * h) * t));
        s = s * 6364136223846793005ull + 1442695040888963407ull; /* the noise floor: a 64-bit LCG */
        double noise = ((double)(s >> 11) / 9007199254740992.0 - 0.5) * 0.01;
        x[i] = (float)(0.1 * env * v + noise);
    }
}
