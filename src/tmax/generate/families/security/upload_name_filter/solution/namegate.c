/* Upload-name gate: one verdict (ACCEPT / REJECT RULE) per name read on stdin. */
#include <stdio.h>
#include <string.h>

{{ consts }}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t decode_once(unsigned char *s, size_t n) {
    size_t r = 0, w = 0;
    while (r < n) {
        if (s[r] == '%' && r + 2 < n && hexval(s[r + 1]) >= 0 && hexval(s[r + 2]) >= 0) {
            s[w++] = (unsigned char)(hexval(s[r + 1]) * 16 + hexval(s[r + 2]));
            r += 3;
        } else {
            s[w++] = s[r++];
        }
    }
    return w;
}

static int is_reserved(const unsigned char *seg, size_t len) {
    char stem[8];
    size_t k = 0;
    while (k < len && seg[k] != '.') k++;
    if (k < 3 || k > 4) return 0;
    for (size_t i = 0; i < k; i++) {
        unsigned char c = seg[i];
        stem[i] = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
    }
    stem[k] = 0;
    if (k == 3)
        return !strcmp(stem, "CON") || !strcmp(stem, "PRN") || !strcmp(stem, "AUX") ||
               !strcmp(stem, "NUL");
    return (!strncmp(stem, "COM", 3) || !strncmp(stem, "LPT", 3)) && stem[3] >= '1' &&
           stem[3] <= '9';
}

static const char *verdict(unsigned char *s, size_t n) {
    if (LEVEL >= 2) {
        for (;;) {
            size_t m = decode_once(s, n);
            int changed = m != n;
            n = m;
            if (LEVEL < 3 || !changed) break;
        }
        for (size_t i = 0; i < n; i++)
            if (s[i] < 0x20 || s[i] > 0x7e) return "badbyte";
    }
    if (LEVEL >= 3 && n > MAXLEN) return "length";
    if (LEVEL >= 2)
        for (size_t i = 0; i < n; i++)
            if (s[i] == '\\') s[i] = '/';
    if (n > 0 && s[0] == '/') return "absolute";
    if (LEVEL >= 3 && n >= 2 && s[1] == ':' &&
        ((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return "drive";
    size_t starts[4096], lens[4096], count = 0, begin = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '/') {
            starts[count] = begin;
            lens[count++] = i - begin;
            begin = i + 1;
        }
    }
    for (size_t k = 0; k < count; k++)
        if (lens[k] == 2 && s[starts[k]] == '.' && s[starts[k] + 1] == '.') return "traversal";
    if (LEVEL >= 4) {
        for (size_t k = 0; k < count; k++)
            if (lens[k] == 0) return "empty";
        for (size_t k = 0; k < count; k++)
            if (s[starts[k]] == '.') return "hidden";
        for (size_t k = 0; k < count; k++) {
            unsigned char c = s[starts[k] + lens[k] - 1];
            if (c == '.' || c == ' ') return "trailing";
        }
        for (size_t k = 0; k < count; k++)
            if (is_reserved(s + starts[k], lens[k])) return "reserved";
    }
    if (LEVEL >= 3) {
        const unsigned char *last = s + starts[count - 1];
        size_t len = lens[count - 1], dot = len;
        for (size_t i = 0; i < len; i++)
            if (last[i] == '.') dot = i;
        if (dot == len) return "extension";
        char ext[64];
        size_t el = len - dot - 1;
        if (el >= sizeof ext) return "extension";
        for (size_t i = 0; i < el; i++) {
            unsigned char c = last[dot + 1 + i];
            ext[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        ext[el] = 0;
        for (size_t i = 0; i < sizeof ALLOWED / sizeof ALLOWED[0]; i++)
            if (!strcmp(ext, ALLOWED[i])) return NULL;
        return "extension";
    }
    return NULL;
}

int main(void) {
    static unsigned char line[8192];
    while (fgets((char *)line, sizeof line, stdin)) {
        size_t n = strlen((char *)line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        const char *rule = verdict(line, n);
        if (rule) printf("REJECT %s\n", rule);
        else printf("ACCEPT\n");
    }
    return 0;
}
