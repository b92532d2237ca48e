/* Decode sealer tokens read on stdin (one per line) back to their plaintexts. */
#include <stdio.h>
#include <string.h>

{{ consts }}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int main(void) {
    static char line[65536];
    static unsigned char out[32768];
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        const char *body = line;
        size_t len = n;
        int check = -1, ok = 1;
        if (LEVEL >= 4) {
            ok = n >= 8 && !strncmp(line, "v2:", 3) && line[n - 3] == ':';
            if (ok) {
                body = line + 3;
                len = n - 6;
                int hi = hexval(line[n - 2]), lo = hexval(line[n - 1]);
                ok = hi >= 0 && lo >= 0 && len > 0 && len % 2 == 0;
                check = hi * 16 + lo;
            }
        }
        size_t count = len / 2;
        unsigned sum = 0;
        for (size_t i = 0; ok && i < count; i++) {
            int hi = hexval(body[2 * i]), lo = hexval(body[2 * i + 1]);
            if (hi < 0 || lo < 0) {
                ok = 0;
                break;
            }
            unsigned v = (unsigned)(hi * 16 + lo);
            if (LEVEL >= 3) v = (v - STEP * (unsigned)i) & 0xffu;
            v ^= KEY[i % (sizeof KEY / sizeof KEY[0])];
            if (LEVEL >= 4 && (v < 32 || v > 126)) ok = 0;
            sum += v;
            out[i] = (unsigned char)v;
        }
        if (LEVEL >= 4 && ok && (int)(((sum + count) & 0xffu) ^ KEY[0]) != check) ok = 0;
        if (!ok) {
            puts("INVALID");
            continue;
        }
        fwrite(out, 1, count, stdout);
        putchar('\n');
    }
    return 0;
}
