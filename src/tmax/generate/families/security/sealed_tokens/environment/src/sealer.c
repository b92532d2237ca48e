#include <stdio.h>
#include <string.h>

static const unsigned char K[] = {{ key }};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: sealer TEXT\n");
        return 2;
    }
    const unsigned char *s = (const unsigned char *)argv[1];
    size_t n = strlen(argv[1]);
    unsigned sum = 0;
    if ({{ level }} >= 4) fputs("v2:", stdout);
    for (size_t i = 0; i < n; i++) {
        unsigned v = s[i] ^ K[i % sizeof K];
        if ({{ level }} >= 3) v = (v + {{ step }}u * (unsigned)i) & 0xffu;
        sum += s[i];
        printf("%02x", v);
    }
    if ({{ level }} >= 4) printf(":%02x", ((sum + (unsigned)n) & 0xffu) ^ K[0]);
    putchar('\n');
    return 0;
}
