/* capture.c — the microphone for vkasr-gtk: ALSA's default capture device (which PulseAudio or PipeWire
 * serve on a desktop) at 16 kHz, mono, 16-bit, the format the models use. Without ALSA at build time,
 * capture reports that it is unavailable. */
#include "app.h"

#include <stdio.h>

#ifdef VKASR_GTK_ALSA
#include <alsa/asoundlib.h>

struct capture {
    snd_pcm_t *pcm;
};

bool capture_available(void) { return true; }

struct capture *capture_open(char *error, size_t size) {
    snd_pcm_t *pcm = NULL;
    int rc = snd_pcm_open(&pcm, "default", SND_PCM_STREAM_CAPTURE, 0);
    if (rc >= 0) /* 100 ms of latency: soft resampling by ALSA when the device runs at another rate */
        rc = snd_pcm_set_params(pcm, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED, 1, VKASR_SAMPLE_RATE, 1,
                                100000);
    if (rc < 0) {
        snprintf(error, size, "microphone (ALSA \"default\"): %s", snd_strerror(rc));
        if (pcm)
            snd_pcm_close(pcm);
        return NULL;
    }
    struct capture *c = g_new0(struct capture, 1);
    c->pcm = pcm;
    return c;
}

long capture_read(struct capture *c, short *samples, size_t frames, char *error, size_t size) {
    size_t got = 0;
    while (got < frames) {
        snd_pcm_sframes_t r = snd_pcm_readi(c->pcm, samples + got, frames - got);
        if (r == -EPIPE || r == -ESTRPIPE || r == -EINTR) { /* overrun or suspend: recover and go on */
            r = snd_pcm_recover(c->pcm, (int)r, 1);
            if (r >= 0)
                continue;
        }
        if (r < 0) {
            snprintf(error, size, "microphone: %s", snd_strerror((int)r));
            return -1;
        }
        got += (size_t)r;
    }
    return (long)got;
}

void capture_close(struct capture *c) {
    if (!c)
        return;
    snd_pcm_close(c->pcm);
    g_free(c);
}

#else

struct capture {
    int unused;
};

bool capture_available(void) { return false; }

struct capture *capture_open(char *error, size_t size) {
    snprintf(error, size, "this build has no microphone support (ALSA was not found when it was built)");
    return NULL;
}

long capture_read(struct capture *c, short *samples, size_t frames, char *error, size_t size) {
    (void)c, (void)samples, (void)frames;
    snprintf(error, size, "no microphone support");
    return -1;
}

void capture_close(struct capture *c) { (void)c; }

#endif
