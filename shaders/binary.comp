#version 460
// binary.comp — y[i] = act(alpha*a[i] + beta*b[i % nb]) (ADD) or act(alpha * a[i]*b[i % nb]) (MUL), f32,
// grid-stride over n elements. b is broadcast cyclically; y may alias a (each element is read, then
// written, by the same invocation).
// push: a, b, y, n, nb, kind, act, alpha, beta. spec 0: workgroup size.
#include "core.glsl"
layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
    uint64_t a, b, y, n, nb;
    uint kind; // 0 ADD, 1 MUL (enum in ops.h)
    uint act;
    float alpha, beta;
} pc;

void main() {
    uint64_t i = grid_id_x();
    uint64_t stride = grid_stride_x();
    // i % nb is carried along the loop: one 64-bit division per invocation, none per element.
    uint64_t j = i % pc.nb;
    uint64_t step = stride % pc.nb;
    for (; i < pc.n; i += stride) {
        float u = LOADF(pc.a, i), v = LOADF(pc.b, j);
        float r = pc.kind == 0u ? pc.alpha * u + pc.beta * v : pc.alpha * (u * v);
        STOREF(pc.y, i, act_apply(r, pc.act));
        j += step;
        if (j >= pc.nb)
            j -= pc.nb;
    }
}
