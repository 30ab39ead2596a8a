#version 460
// glu.comp — gated linear unit over the last dimension: x [R, 2C] -> y [R, C],
// y[r, c] = x[r, c] * sigmoid(x[r, C + c]); grid-stride over R*C outputs. x and y f32, or each f16
// with -DIO_F16 (io.glsl).
// push: x, y, n = R*C, C. spec 0: workgroup size; 7: tensor types (IO_F16).
#ifdef IO_F16
#define HAS_F16
#endif
#include "core.glsl"
#include "io.glsl"
layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
    uint64_t x, y, n, cols;
} pc;

void main() {
    uint64_t i = grid_id_x();
    uint64_t stride = grid_stride_x();
    // (row, col) of output i is carried along the loop: no division per element.
    uint64_t r = i / pc.cols, c = i % pc.cols;
    uint64_t dr = stride / pc.cols, dc = stride % pc.cols;
    for (; i < pc.n; i += stride) {
        uint64_t xi = r * 2ul * pc.cols + c;
        float v = load_in(pc.x, xi), g = load_in(pc.x, xi + pc.cols);
        store_out(pc.y, i, v * sigmoid_f(g));
        r += dr;
        c += dc;
        if (c >= pc.cols) {
            c -= pc.cols;
            r += 1ul;
        }
    }
}
