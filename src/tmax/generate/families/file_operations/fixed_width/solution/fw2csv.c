/* Convert a fixed-width export to CSV: {{ tool_name }} LAYOUT FILE (CSV on stdout, UTF-8;
   rejected records as `LINE REASON` on stderr). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEVEL {{ level }}

static char fname[64][64], fkind[64][16];
static int fstart[64], fwidth[64], nfields;

static void put(const unsigned char *s, size_t n, char *out, size_t *len) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0x80) {
            out[(*len)++] = (char)s[i];
        } else {
            out[(*len)++] = (char)(0xC0 | (s[i] >> 6));
            out[(*len)++] = (char)(0x80 | (s[i] & 0x3F));
        }
    }
}

static void field(const unsigned char *v, size_t n, char *out, size_t *len) {
    int quote = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] == ',' || v[i] == '"') quote = 1;
    if (!quote) {
        put(v, n, out, len);
        return;
    }
    out[(*len)++] = '"';
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '"') out[(*len)++] = '"';
        put(v + i, 1, out, len);
    }
    out[(*len)++] = '"';
}

static int valid_date(const unsigned char *s) {
    for (int i = 0; i < 8; i++)
        if (!isdigit(s[i])) return 0;
    int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
    int m = (s[4] - '0') * 10 + (s[5] - '0'), d = (s[6] - '0') * 10 + (s[7] - '0');
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1];
}

int main(int argc, char **argv) {
    static char line[65536], out[262144];
    if (argc < 3) return 2;
    FILE *in = fopen(argv[1], "r");
    if (!in) return perror(argv[1]), 1;
    while (fgets(line, sizeof line, in) && nfields < 64) {
        char name[64], kind[16];
        int start, width;
        if (line[0] == '#') continue;
        if (sscanf(line, "%63s %d %d %15s", name, &start, &width, kind) != 4) continue;
        strcpy(fname[nfields], name);
        strcpy(fkind[nfields], kind);
        fstart[nfields] = start;
        fwidth[nfields++] = width;
    }
    fclose(in);
    int length = 0;
    for (int i = 0; i < nfields; i++)
        if (fstart[i] + fwidth[i] - 1 > length) length = fstart[i] + fwidth[i] - 1;
    for (int i = 0; i < nfields; i++) printf("%s%s", i ? "," : "", fname[i]);
    putchar('\n');
    in = fopen(argv[2], "rb");
    if (!in) return perror(argv[2]), 1;
    long number = 0;
    while (fgets(line, sizeof line, in)) {
        number++;
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n') line[--n] = 0;
        if (LEVEL >= 2 && n && line[n - 1] == '\r') line[--n] = 0;
        if (!n || (LEVEL >= 3 && line[0] != 'D')) continue;
        if ((int)n != length) {
            fprintf(stderr, "%ld length\n", number);
            continue;
        }
        size_t len = 0;
        const char *bad = NULL;
        for (int i = 0; i < nfields && !bad; i++) {
            const unsigned char *v = (const unsigned char *)line + fstart[i] - 1;
            size_t w = (size_t)fwidth[i];
            char text[128];
            if (i) out[len++] = ',';
            if (!strcmp(fkind[i], "text")) {
                while (w && *v == ' ') v++, w--;
                while (w && v[w - 1] == ' ') w--;
                field(v, w, out, &len);
            } else if (!strcmp(fkind[i], "int")) {
                long long x = 0;
                for (size_t k = 0; k < w; k++) x = x * 10 + (v[k] - '0');
                len += (size_t)sprintf(out + len, "%lld", x);
            } else if (!strcmp(fkind[i], "money")) {
                size_t k = v[0] == '-' ? 1 : 0;
                if (k == w) bad = "amount";
                for (size_t j = k; j < w; j++)
                    if (!isdigit(v[j])) bad = "amount";
                if (bad) break;
                long long cents = 0;
                for (size_t j = k; j < w; j++) cents = cents * 10 + (v[j] - '0');
                snprintf(text, sizeof text, "%s%lld.%02lld", k && cents ? "-" : "", cents / 100,
                         cents % 100);
                field((const unsigned char *)text, strlen(text), out, &len);
            } else {
                if (w != 8 || !valid_date(v)) {
                    bad = "date";
                    break;
                }
                snprintf(text, sizeof text, "%.4s-%.2s-%.2s", (const char *)v,
                         (const char *)v + 4, (const char *)v + 6);
                field((const unsigned char *)text, strlen(text), out, &len);
            }
        }
        if (bad) {
            fprintf(stderr, "%ld %s\n", number, bad);
            continue;
        }
        out[len++] = '\n';
        fwrite(out, 1, len, stdout);
    }
    fclose(in);
    return 0;
}
