#version 460
// unary.comp — y[i] = act(alpha * x[i]) over n elements (f32), grid-stride. x and y may alias.
// push: x, y, n, act, alpha. spec 0: workgroup size.
#include "core.glsl"
layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
    uint64_t x, y, n;
    uint act;
    float alpha;
} pc;

void main() {
    for (uint64_t i = grid_id_x(); i < pc.n; i += grid_stride_x())
        STOREF(pc.y, i, act_apply(pc.alpha * LOADF(pc.x, i), pc.act));
}
