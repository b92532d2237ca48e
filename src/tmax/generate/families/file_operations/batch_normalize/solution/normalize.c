#include <stdio.h>
#include <stdlib.h>

/* 1 when buf[0..n) is well-formed UTF-8 (no overlongs, surrogates or values > U+10FFFF). */
static int valid_utf8(const unsigned char *s, long n) {
    long i = 0;
    while (i < n) {
        unsigned c = s[i];
        long need;
        unsigned cp, min;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) { need = 1; cp = c & 0x1F; min = 0x80; }
        else if (c >= 0xE0 && c <= 0xEF) { need = 2; cp = c & 0x0F; min = 0x800; }
        else if (c >= 0xF0 && c <= 0xF4) { need = 3; cp = c & 0x07; min = 0x10000; }
        else return 0;
        for (long k = 1; k <= need; k++) {
            if (i + k >= n || (s[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += need + 1;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s FILE\n", argv[0]); return 2; }
    FILE *fp = fopen(argv[1], "rb");
    if (!fp) { perror(argv[1]); return 1; }
    long cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(fp);
    long cap2 = 2 * n + 1, m = 0;
    unsigned char *out = malloc(cap2);
    if (valid_utf8(buf, n)) {
        for (long i = 0; i < n; i++) out[m++] = buf[i];
    } else {
        for (long i = 0; i < n; i++) {
            if (buf[i] < 0x80) out[m++] = buf[i];
            else { out[m++] = 0xC0 | (buf[i] >> 6); out[m++] = 0x80 | (buf[i] & 0x3F); }
        }
    }
    long start = (m >= 3 && out[0] == 0xEF && out[1] == 0xBB && out[2] == 0xBF) ? 3 : 0;
    for (long i = start; i < m; i++) {
        if (out[i] == '\r' && i + 1 < m && out[i + 1] == '\n') continue;
        putchar(out[i]);
    }
    return 0;
}
