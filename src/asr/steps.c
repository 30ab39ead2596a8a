/* steps.c — where a run may stop. The network counts the work it records in estimated multiply-adds;
 * once a step's worth is recorded it is started, the host waits for the step before it, and the abort
 * hook is asked. On a CPU device the chunks are also cut to about a step, so no submission holds much
 * more: an abort ends the run within about two steps. The schedule depends on shapes only, never on
 * timing, so a run polls at the same points every time. */
#include "asr.h"

void asr_steps_init(struct asr_steps *s, struct backend *be, const struct asr_hooks *hooks, bool cut) {
    const bool cpu = be->dev->info.cpu;
    const int64_t cpu_step = be->dev->info.step_macs > 0 ? be->dev->info.step_macs : ASR_STEP_MACS_CPU;
    *s = (struct asr_steps){.be = be, .hooks = hooks, .budget = cpu ? cpu_step : ASR_STEP_MACS_GPU,
                            .cut = cut && cpu};
}

int64_t asr_steps_rows(const struct asr_steps *s, int64_t rows, int64_t fixed, int64_t per_row, int64_t align) {
    if (!s || !s->cut || per_row <= 0)
        return rows;
    int64_t n = s->budget > fixed ? (s->budget - fixed) / per_row / align * align : 0;
    n = n < align ? align : n;
    return n < rows ? n : rows;
}

vkasr_status asr_steps_poll(struct asr_steps *s) {
    if (!s)
        return VKASR_OK;
    s->done = 0;
    /* start this step, wait for the one before: the device stays busy, the host one step ahead */
    TRY(be_flush(s->be));
    TRY(be_throttle(s->be, 1));
    const struct asr_hooks *h = s->hooks;
    return h && h->should_abort && h->should_abort(h->ud) ? VKASR_ABORTED : VKASR_OK;
}

vkasr_status asr_steps_add(struct asr_steps *s, int64_t macs) {
    if (!s)
        return VKASR_OK;
    s->done += macs;
    return s->done >= s->budget ? asr_steps_poll(s) : VKASR_OK;
}
