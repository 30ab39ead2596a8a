/* spv2c: build-time helper turning a SPIR-V binary into a C array definition.
 * usage: spv2c in.spv out.h symbol   — writes `static const uint32_t symbol[] = {...};` */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: spv2c in.spv out.h symbol\n");
        return 2;
    }
    FILE *in = fopen(argv[1], "rb");
    if (!in) {
        perror(argv[1]);
        return 1;
    }
    FILE *out = fopen(argv[2], "w");
    if (!out) {
        perror(argv[2]);
        fclose(in);
        return 1;
    }
    fprintf(out, "static const uint32_t %s[] = {", argv[3]);
    uint32_t w;
    size_t n = 0;
    while (fread(&w, 4, 1, in) == 1) {
        fprintf(out, "%s0x%08xu,", (n++ % 8) ? " " : "\n    ", w);
    }
    fprintf(out, "\n};\n");
    int bad = n == 0 || ferror(in);
    fclose(in);
    if (fclose(out) != 0 || bad) {
        fprintf(stderr, "spv2c: failed on %s\n", argv[1]);
        return 1;
    }
    return 0;
}
