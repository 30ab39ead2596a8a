/* test_header.c — vkasr.h compiles on its own as strict C11 (and, via test_header.cpp, as C++). */
#include "vkasr.h"

_Static_assert(sizeof(vkasr_error) >= 1024, "vkasr_error carries the message");

int main(void) {
    vkasr_model_params mp = vkasr_model_params_default();
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    vkasr_stream_params sp = vkasr_stream_params_default();
    return (mp.struct_size == sizeof mp && tp.struct_size == sizeof tp && sp.struct_size == sizeof sp &&
            vkasr_version_number() == VKASR_VERSION_NUMBER)
               ? 0
               : 1;
}
