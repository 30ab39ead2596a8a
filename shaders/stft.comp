#version 460
// stft.comp — power spectrum of pre-emphasised, centred, zero-padded, windowed frames (mel front end):
//   frame t = f0 + f covers samples hop*t - n_fft/2 .. hop*t + n_fft/2 - 1 (zero outside [0, n));
//   e[s] = x[s] - preemph * x[s-1] (e[0] = x[0]); a[m] = e[start + m] * wpad[m], wpad = window centred
//   at offset off = (n_fft - win) / 2;  y[f, k] = |sum_m a[m] exp(-2 pi i k m / n_fft)|^2, k = 0..n_fft/2.
// n_fft = 2M must be a power of two. The real n_fft-point transform is one complex M-point FFT of
// z[m] = a[2m] + i a[2m+1] (radix-2, decimation in time, in place in shared memory after a
// bit-reversed load) followed by the usual even/odd split. One workgroup per frame, grid-stride over
// frames. A packed batch (nseg > 0): row f's segment (row0, x0, n, f0) of the table seg [nseg, 4] gives
// its signal x[x0, x0 + n) and its frame f0 + f - row0 in it. Shared memory: 2M + M floats (24 KiB at
// n_fft = 4096, within lavapipe's 32 KiB).
// Twiddles: GLSL sin/cos only promise ~2^-11 absolute error, so they are evaluated here from integer
// angles: exact reduction to |angle| <= pi/4 on the quarter-turn grid, then Taylor polynomials
// (truncation < 2e-9), about 1 ulp in all.
// push: see PC. spec 0: workgroup size, 1: M = n_fft/2, 2: max(M/2, 1), 3: log2(M).
#include "core.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint M = 256;
layout(constant_id = 2) const uint MH = 128;
layout(constant_id = 3) const uint LG = 8;
layout(push_constant) uniform PC {
    uint64_t x, window, y;
    int64_t n, f0, frames, hop;
    uint win, off;
    float preemph;
    uint pad0;
    uint64_t seg;
    int64_t nseg;
} pc;

shared float zr[M], zi[M];     // the frame being transformed
shared float twr[MH], twi[MH]; // exp(-2 pi i k / M), k < M/2

// (cos, sin) of 2 pi k / 2^lg for an integer 0 <= k < 2^lg.
vec2 cis_turn(uint k, uint lg) {
    const float f = ldexp(float(k), -int(lg)); // exact: k < 2^24
    const float q = floor(4.0 * f + 0.5);      // nearest quarter turn
    const float r = f - 0.25 * q;              // exact, |r| <= 1/8 turn
    const float a = r * 6.28318530717958648, a2 = a * a;
    const float s = a + a * a2 * (-1.0 / 6.0 + a2 * (1.0 / 120.0 + a2 * (-1.0 / 5040.0 + a2 * (1.0 / 362880.0))));
    const float c =
        1.0 + a2 * (-0.5 + a2 * (1.0 / 24.0 + a2 * (-1.0 / 720.0 + a2 * (1.0 / 40320.0 + a2 * (-1.0 / 3628800.0)))));
    switch (uint(q) & 3u) {
    case 0u: return vec2(c, s);
    case 1u: return vec2(-s, c);
    case 2u: return vec2(-c, -s);
    default: return vec2(s, -c);
    }
}

// Windowed, pre-emphasised sample m of the frame starting at sample `start` of the signal x [n].
float frame_sample(uint64_t x, int64_t n, int64_t start, uint m) {
    if (m < pc.off || m >= pc.off + pc.win)
        return 0.0;
    const int64_t s = start + int64_t(m);
    if (s < 0 || s >= n)
        return 0.0;
    float e = LOADF(x, s);
    if (s > 0)
        e -= pc.preemph * LOADF(x, s - 1);
    return e * LOADF(pc.window, m - pc.off);
}

void main() {
    const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    for (uint k = lid; k < M / 2u; k += wg) {
        const vec2 cs = cis_turn(k, LG);
        twr[k] = cs.x;
        twi[k] = -cs.y;
    }
    // (The barrier after the first frame's load orders these writes before any butterfly.)
    const int64_t half_n = int64_t(M); // n_fft / 2
    const uint64_t nb = uint64_t(M) + 1ul;
    for (int64_t f = int64_t(gl_WorkGroupID.x); f < pc.frames; f += int64_t(gl_NumWorkGroups.x)) {
        uint64_t x = pc.x;
        int64_t n = pc.n, t = pc.f0 + f;
        if (pc.nseg > 0) { // the frame's segment: the last whose first row is at most f
            int64_t lo = 0, hi = pc.nseg - 1;
            while (lo < hi) {
                const int64_t mid = lo + (hi - lo + 1) / 2;
                if (LOADL(pc.seg, 4 * mid) <= f)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            x += uint64_t(LOADL(pc.seg, 4 * lo + 1)) * 4ul;
            n = LOADL(pc.seg, 4 * lo + 2);
            t = LOADL(pc.seg, 4 * lo + 3) + f - LOADL(pc.seg, 4 * lo);
        }
        const int64_t start = t * pc.hop - half_n;
        for (uint m = lid; m < M; m += wg) {
            const uint dst = LG == 0u ? 0u : bitfieldReverse(m) >> (32u - LG);
            zr[dst] = frame_sample(x, n, start, 2u * m);
            zi[dst] = frame_sample(x, n, start, 2u * m + 1u);
        }
        barrier();
        for (uint s = 1u; s <= LG; s++) {
            const uint half_span = 1u << (s - 1u);
            for (uint b = lid; b < M / 2u; b += wg) {
                const uint k = b & (half_span - 1u);
                const uint i0 = ((b >> (s - 1u)) << s) + k, i1 = i0 + half_span;
                const uint t = k << (LG - s);
                const float wr = twr[t], wi = twi[t];
                const float vr = zr[i1] * wr - zi[i1] * wi, vi = zr[i1] * wi + zi[i1] * wr;
                const float ur = zr[i0], ui = zi[i0];
                zr[i0] = ur + vr;
                zi[i0] = ui + vi;
                zr[i1] = ur - vr;
                zi[i1] = ui - vi;
            }
            barrier();
        }
        // Split: Z = E + iO with E, O the transforms of the even and odd samples;
        // X[k] = E[k] + exp(-2 pi i k / n_fft) O[k], k = 0..M (indices of Z taken mod M).
        for (uint k = lid; k <= M; k += wg) {
            const uint ka = k == M ? 0u : k, kb = k == 0u ? 0u : M - k;
            const float ar = zr[ka], ai = zi[ka], br = zr[kb], bi = -zi[kb]; // b = conj(Z[M-k])
            const float er = 0.5 * (ar + br), ei = 0.5 * (ai + bi);
            const float or_ = 0.5 * (ai - bi), oi = -0.5 * (ar - br); // (a - b) / 2i
            const vec2 cs = cis_turn(k, LG + 1u);
            const float wr = cs.x, wi = -cs.y;
            const float xr = er + (wr * or_ - wi * oi), xi = ei + (wr * oi + wi * or_);
            STOREF(pc.y, uint64_t(f) * nb + uint64_t(k), xr * xr + xi * xi);
        }
        // The next frame's load overwrites zr/zi: every thread must be done reading them.
        barrier();
    }
}
