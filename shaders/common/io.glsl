// io.glsl — the f32 or f16 input x and output y of the element-wise, row and convolution kernels.
// Built with -DIO_F16 (which needs HAS_F16 defined before core.glsl), a kernel takes their types from
// specialization constant 7 (bit 0: x f16, bit 2: y f16, the bits linear.glsl uses), reads f16 exactly
// and rounds an f16 output once, at the store, to the nearest f16 (ties to even: STOREH_RNE, which
// stores packHalf2x16's bits, not a float16_t() conversion of driver-chosen rounding). Without IO_F16
// both are f32 and the module needs no 16-bit storage, so it runs on devices without it.
// Include after core.glsl.
#ifdef IO_F16
layout(constant_id = 7) const uint IO_TYPES = 0;
#else
const uint IO_TYPES = 0;
#endif
const bool IN16 = (IO_TYPES & 1u) != 0u;
const bool OUT16 = (IO_TYPES & 4u) != 0u;

// Element i of the input at base, widened to f32.
float load_in(uint64_t base, uint64_t i) {
#ifdef IO_F16
    if (IN16)
        return LOADH(base, i);
#endif
    return LOADF(base, i);
}

// Element i of the output at base = v, in the output's type.
void store_out(uint64_t base, uint64_t i, float v) {
#ifdef IO_F16
    if (OUT16) {
        STOREH_RNE(base, i, v);
        return;
    }
#endif
    STOREF(base, i, v);
}
