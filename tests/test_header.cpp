// test_header.cpp — vkasr.h and vkasr_debug.h used from C++ (extern "C" linkage, no C-only constructs).
#include "vkasr_debug.h"

#include <cstring>

int main() {
    vkasr_model_params mp = vkasr_model_params_default();
    vkasr_error err;
    vkasr_model *m = nullptr;
    vkasr_status st = vkasr_model_load(nullptr, &mp, &m, &err);
    vkasr_debug_params dp = vkasr_debug_params_default();
    return (st == VKASR_ERR_INVALID_ARG && m == nullptr && std::strlen(err.message) > 0 &&
            dp.struct_size == sizeof dp && vkasr_session_set_debug(nullptr, &dp) == VKASR_ERR_INVALID_ARG)
               ? 0
               : 1;
}
