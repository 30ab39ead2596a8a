/* test_hub.c — models by name through the public API, without network or device: name parsing and the
 * index ($VKASR_PULL_INDEX, its errors), the choice among a repository's files, the cache directory's
 * variables, and resolution in a cache laid out as huggingface_hub writes it (refs, snapshot links,
 * a dangling link, a pinned commit falling back to refs/main). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "expect.h"
#include "vkasr.h"

static char root[256];

static void put(const char *rel, const char *text) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    for (char *s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        mkdir(p, 0777);
        *s = '/';
    }
    FILE *f = fopen(p, "w");
    EXPECT(f != NULL, "cannot write %s", p);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void link_to(const char *rel, const char *target) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    EXPECT(symlink(target, p) == 0, "symlink %s", p);
}

static void lookup(void) {
    vkasr_hub_model m;
    vkasr_error e;
    EXPECT(vkasr_hub_lookup("parakeet-tdt", &m, &e) == VKASR_OK, "%s", e.message);
    EXPECT(!strcmp(m.repo, "nvidia/parakeet-tdt-0.6b-v3") && !strcmp(m.file, "parakeet-tdt-0.6b-v3.q8_0.gguf") &&
               !strcmp(m.revision, "541d1f99c6b0c3cd0b11a95167540bb8edefd82b") && m.size == 713975456 &&
               strlen(m.sha256) == 64,
           "the built-in alias: %s %s %s %llu", m.repo, m.file, m.revision, (unsigned long long)m.size);
    EXPECT(vkasr_hub_lookup("org/re.po_1-x", &m, &e) == VKASR_OK && !strcmp(m.repo, "org/re.po_1-x") && !m.file[0] &&
               !m.quant[0] && !strcmp(m.revision, "main") && !m.aliases[0],
           "org/repo");
    EXPECT(vkasr_hub_lookup("org/repo:Q8_0", &m, &e) == VKASR_OK && !strcmp(m.quant, "q8_0") && !m.file[0], ":quant");
    EXPECT(vkasr_hub_lookup("org/repo:sub/a.nemo", &m, &e) == VKASR_OK && !strcmp(m.file, "sub/a.nemo") &&
               !strcmp(m.repo, "org/repo"),
           ":file");
    static const char *const bad[] = {"no-such-alias", "/abs/path", "a/b/c", "org/", "/repo", "org/repo:",
                                      "org/../x", "org/.hidden", "or g/repo", "org/repo:../x.gguf", "a--b/c",
                                      "org/repo-"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT(vkasr_hub_lookup(bad[i], &m, &e) == VKASR_ERR_INVALID_ARG && strstr(e.message, bad[i]),
               "'%s' refused naming itself: %s", bad[i], e.message);
}

static void index_file(void) {
    vkasr_hub_model m;
    vkasr_error e;
    char p[512];
    snprintf(p, sizeof p, "%s/index.json", root);
    setenv("VKASR_PULL_INDEX", p, 1);
    put("index.json", "{\"models\": [{\"repo\": \"me/tiny\", \"aliases\": [\"parakeet-tdt\"], \"artifacts\": ["
                      "{\"role\": \"tts\", \"filename\": \"x.gguf\"}, {\"filename\": \"t.gguf\", \"size\": 7}]}]}");
    size_t n = vkasr_hub_index(NULL, 0);
    EXPECT(n == 5, "4 built-in entries and 1 of the file: %zu", n);
    EXPECT(vkasr_hub_lookup("parakeet-tdt", &m, &e) == VKASR_OK && !strcmp(m.repo, "me/tiny") &&
               !strcmp(m.file, "t.gguf") && m.size == 7 && !strcmp(m.revision, "main") && !m.sha256[0] &&
               !strcmp(m.aliases, "tiny,parakeet-tdt"),
           "the file's alias wins: %s %s %s", m.repo, m.file, m.aliases);
    EXPECT(vkasr_hub_lookup("tiny", &m, &e) == VKASR_OK && !strcmp(m.repo, "me/tiny"), "the repository's name");
    put("index.json", "{\"models\": [{\"repo\": \"me/tiny\", \"artifacts\": [{\"filename\": \"t\", \"sha256\": "
                      "\"XYZ\"}]}]}");
    EXPECT(vkasr_hub_lookup("tiny", &m, &e) == VKASR_ERR_INVALID_ARG && strstr(e.message, p) &&
               strstr(e.message, "models[0] (t): sha256"),
           "a bad sha256 named: %s", e.message);
    put("index.json", "{\"models\": [");
    EXPECT(vkasr_hub_lookup("tiny", &m, &e) == VKASR_ERR_INVALID_ARG && strstr(e.message, "not valid JSON"),
           "bad JSON named: %s", e.message);
    EXPECT(vkasr_hub_index(NULL, 0) == 0, "a malformed index lists nothing");
    unsetenv("VKASR_PULL_INDEX");
}

static void pick(void) {
    const char *const a[] = {"README.md", "m.q8_0.gguf", "m.f32.gguf", "m.f16.gguf", "m.nemo"};
    EXPECT(vkasr_hub_pick(a, 5, NULL) == 3, "f16 first");
    EXPECT(vkasr_hub_pick(a, 5, "q8_0") == 1 && vkasr_hub_pick(a, 5, "F32") == 2, "the quant asked");
    EXPECT(vkasr_hub_pick(a, 5, "q4_k") == -2, "a quant not there");
    EXPECT(vkasr_hub_pick(a + 4, 1, NULL) == 0, ".nemo");
    const char *const b[] = {"z.gguf", "y.bf16.gguf", "m.nemo"};
    EXPECT(vkasr_hub_pick(b, 3, NULL) == 1, "no preferred type: the first GGUF by name");
    const char *const c[] = {"tokenizer.json", "config.json", "model-00001.safetensors"};
    EXPECT(vkasr_hub_pick(c, 3, NULL) == -1, "transformers");
    EXPECT(vkasr_hub_pick(c, 2, NULL) == -2 && vkasr_hub_pick(NULL, 0, NULL) == -2, "nothing vkasr reads");
}

static void cache_dir(void) {
    char b[512];
    unsetenv("HF_HUB_CACHE");
    unsetenv("HF_HOME");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/h", 1);
    EXPECT(vkasr_hub_cache_dir(b, sizeof b) && !strcmp(b, "/h/.cache/huggingface/hub"), "HOME: %s", b);
    setenv("XDG_CACHE_HOME", "/x", 1);
    EXPECT(vkasr_hub_cache_dir(b, sizeof b) && !strcmp(b, "/x/huggingface/hub"), "XDG_CACHE_HOME: %s", b);
    setenv("HF_HOME", "/hf", 1);
    EXPECT(vkasr_hub_cache_dir(b, sizeof b) && !strcmp(b, "/hf/hub"), "HF_HOME: %s", b);
    setenv("HF_HUB_CACHE", root, 1);
    EXPECT(vkasr_hub_cache_dir(b, sizeof b) && !strcmp(b, root), "HF_HUB_CACHE: %s", b);
    EXPECT(vkasr_hub_cache_dir(b, 4) == NULL, "too small a buffer");
}

static void resolve(void) {
    char p[1024], want[1024];
    vkasr_error e;
    const char *c1 = "1111111111111111111111111111111111111111", *c2 = "2222222222222222222222222222222222222222";
    char rel[256];
    /* org/repo at main: a GGUF, a .nemo and a dangling link (a blob not there) */
    put("models--org--repo/blobs/aaa", "GGUF");
    put("models--org--repo/refs/main", c1);
    snprintf(rel, sizeof rel, "models--org--repo/snapshots/%s/m.q8_0.gguf", c1);
    put(rel, ""); /* makes the directories; the file gives way to the link */
    snprintf(p, sizeof p, "%s/%s", root, rel);
    unlink(p);
    link_to(rel, "../../blobs/aaa");
    snprintf(rel, sizeof rel, "models--org--repo/snapshots/%s/m.f16.gguf", c1);
    link_to(rel, "../../blobs/missing");
    EXPECT(vkasr_hub_resolve("org/repo", p, sizeof p, &e) == VKASR_OK, "%s", e.message);
    snprintf(want, sizeof want, "%s/models--org--repo/snapshots/%s/m.q8_0.gguf", root, c1);
    EXPECT(!strcmp(p, want), "the dangling f16 link is skipped: %s", p);
    EXPECT(vkasr_hub_resolve("org/repo:f16", p, sizeof p, &e) == VKASR_ERR_IO && strstr(e.message, "no GGUF of type f16"),
           "%s", e.message);
    EXPECT(vkasr_hub_resolve("org/repo", p, 8, &e) == VKASR_ERR_INVALID_ARG, "a small buffer");
    /* a revision other than main: no ref */
    EXPECT(vkasr_hub_resolve("org/other", p, sizeof p, &e) == VKASR_ERR_IO &&
               strstr(e.message, "model 'org/other' is not in the Hugging Face cache") &&
               strstr(e.message, "run `vkasr pull org/other`") && strstr(e.message, root),
           "%s", e.message);
    /* a pinned alias: its commit's snapshot, else refs/main's */
    char idx[512];
    snprintf(idx, sizeof idx, "%s/index2.json", root);
    snprintf(p, sizeof p, "{\"models\": [{\"repo\": \"org/repo\", \"aliases\": [\"al\"], \"revision\": \"%s\", "
                          "\"artifacts\": [{\"filename\": \"m.q8_0.gguf\"}]}]}", c2);
    put("index2.json", p);
    setenv("VKASR_PULL_INDEX", idx, 1);
    EXPECT(vkasr_hub_resolve("al", p, sizeof p, &e) == VKASR_OK && !strcmp(p, want), "refs/main's snapshot: %s %s",
           p, e.message);
    snprintf(rel, sizeof rel, "models--org--repo/snapshots/%s/m.q8_0.gguf", c2);
    put(rel, "GGUF2");
    snprintf(want, sizeof want, "%s/%s", root, rel);
    EXPECT(vkasr_hub_resolve("al", p, sizeof p, &e) == VKASR_OK && !strcmp(p, want), "the pinned snapshot: %s", p);
    unsetenv("VKASR_PULL_INDEX");
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/vkasr_test_hub_%ld", (long)getpid());
    mkdir(root, 0777);
    lookup();
    index_file();
    pick();
    cache_dir();
    resolve();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        printf("note: %s not removed\n", root);
    printf("test_hub: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
