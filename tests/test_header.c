/* test_header.c — vkasr.h and vkasr_debug.h compile on their own as strict C11 (and, via
 * test_header.cpp, as C++). vkasr_debug.h comes first: it includes vkasr.h before anything else. */
#include "vkasr_debug.h"
#include "vkasr.h"

_Static_assert(sizeof(vkasr_error) >= 1024, "vkasr_error carries the message");

int main(void) {
    vkasr_model_params mp = vkasr_model_params_default();
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    vkasr_stream_params sp = vkasr_stream_params_default();
    vkasr_debug_params dp = vkasr_debug_params_default();
    return (mp.struct_size == sizeof mp && tp.struct_size == sizeof tp && sp.struct_size == sizeof sp &&
            dp.struct_size == sizeof dp && !dp.keep_features && !dp.stage_callback && !dp.n_forced_steps &&
            vkasr_version_number() == VKASR_VERSION_NUMBER)
               ? 0
               : 1;
}
