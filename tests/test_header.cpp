// test_header.cpp — vkasr.h used from C++ (extern "C" linkage, no C-only constructs).
#include "vkasr.h"

#include <cstring>

int main() {
    vkasr_model_params mp = vkasr_model_params_default();
    vkasr_error err;
    vkasr_model *m = nullptr;
    vkasr_status st = vkasr_model_load(nullptr, &mp, &m, &err);
    return (st == VKASR_ERR_INVALID_ARG && m == nullptr && std::strlen(err.message) > 0) ? 0 : 1;
}
