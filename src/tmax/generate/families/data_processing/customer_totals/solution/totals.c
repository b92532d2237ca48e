#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEVEL {{ level }}

static char **txns, **names;
static long long *tot;
static long *cnt;
static long ntx, ncust, captx, capcust;

static char *dupstr(const char *s) {
    char *copy = malloc(strlen(s) + 1);
    strcpy(copy, s);
    return copy;
}

static int cmp(const void *a, const void *b) {
    return strcmp(names[*(const long *)a], names[*(const long *)b]);
}

static long long cents(const char *s) {
    long long whole = atoll(s);
    const char *dot = strchr(s, '.');
    long long frac = 0;
    if (dot) {
        frac = (dot[1] >= '0' && dot[1] <= '9' ? dot[1] - '0' : 0) * 10;
        if (dot[1] && dot[2] >= '0' && dot[2] <= '9') frac += dot[2] - '0';
    }
    return whole * 100 + frac;
}

int main(int argc, char **argv) {
    char line[1024];
    for (int a = 1; a < argc; a++) {
        FILE *fp = fopen(argv[a], "r");
        if (!fp) { perror(argv[a]); return 1; }
        int first = 1;
        while (fgets(line, sizeof line, fp)) {
            if (first) { first = 0; continue; }
            line[strcspn(line, "\r\n")] = 0;
            char *f[5];
            int n = 0;
            for (char *p = line; n < 5; n++) {
                f[n] = p;
                char *c = strchr(p, ',');
                if (!c) { n++; break; }
                *c = 0;
                p = c + 1;
            }
            if (n < 5) continue;
            if (LEVEL >= 2) {
                int dup = 0;
                for (long i = 0; i < ntx && !dup; i++) dup = strcmp(txns[i], f[0]) == 0;
                if (dup) continue;
                if (ntx == captx) txns = realloc(txns, (captx = captx * 2 + 16) * sizeof *txns);
                txns[ntx++] = dupstr(f[0]);
            }
            long long v;
            if (strcmp(f[4], "settled") == 0) v = cents(f[3]);
            else if (LEVEL >= 3 && strcmp(f[4], "refund") == 0) v = -cents(f[3]);
            else continue;
            long i;
            for (i = 0; i < ncust && strcmp(names[i], f[2]) != 0; i++) {}
            if (i == ncust) {
                if (ncust == capcust) {
                    capcust = capcust * 2 + 16;
                    names = realloc(names, capcust * sizeof *names);
                    tot = realloc(tot, capcust * sizeof *tot);
                    cnt = realloc(cnt, capcust * sizeof *cnt);
                }
                names[ncust] = dupstr(f[2]);
                tot[ncust] = 0;
                cnt[ncust++] = 0;
            }
            tot[i] += v;
            cnt[i]++;
        }
        fclose(fp);
    }
    long *order = malloc((ncust + 1) * sizeof *order);
    for (long i = 0; i < ncust; i++) order[i] = i;
    qsort(order, ncust, sizeof *order, cmp);
    puts(LEVEL >= 4 ? "customer,total,count" : "customer,total");
    for (long j = 0; j < ncust; j++) {
        long i = order[j];
        long long t = tot[i], a = t < 0 ? -t : t;
        printf("%s,%s%lld.%02lld", names[i], t < 0 ? "-" : "", a / 100, a % 100);
        if (LEVEL >= 4) printf(",%ld", cnt[i]);
        printf("\n");
    }
    return 0;
}
