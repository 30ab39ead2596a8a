/* pcaudio_stub.c — a stand-in for libpcaudio.so.0 (audio output) for running espeak-ng on a machine
 * without ALSA/PulseAudio (the GPU machine). libespeak-ng links libpcaudio, which pulls in libasound,
 * libpulse, libdbus, libsndfile, X11 libraries and more; the training recipe only synthesises into
 * memory (AUDIO_OUTPUT_SYNCHRONOUS) or to files, where espeak-ng never opens an audio device. Every
 * function reports "no device". Built by tools/train/fetch_espeak.sh; signatures from pcaudio.h 1.2. */
#include <stddef.h>
#include <stdint.h>

struct audio_object;

struct audio_object *create_audio_device_object(const char *device, const char *application_name,
                                                const char *description) {
    (void)device;
    (void)application_name;
    (void)description;
    return NULL;
}

int audio_object_open(struct audio_object *object, int format, uint32_t rate, uint8_t channels) {
    (void)object;
    (void)format;
    (void)rate;
    (void)channels;
    return -1;
}

void audio_object_close(struct audio_object *object) { (void)object; }

void audio_object_destroy(struct audio_object *object) { (void)object; }

int audio_object_write(struct audio_object *object, const void *data, size_t bytes) {
    (void)object;
    (void)data;
    (void)bytes;
    return -1;
}

int audio_object_drain(struct audio_object *object) {
    (void)object;
    return -1;
}

int audio_object_flush(struct audio_object *object) {
    (void)object;
    return -1;
}

const char *audio_object_strerror(struct audio_object *object, int error) {
    (void)object;
    (void)error;
    return "no audio device (vkasr training stub of libpcaudio)";
}
