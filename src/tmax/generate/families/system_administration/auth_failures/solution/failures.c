#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>

static char ips[100000][64];
static long counts[100000];
static long n;

static int order(const void *a, const void *b) {
    long i = *(const long *)a, j = *(const long *)b;
    if (counts[i] != counts[j]) return counts[i] < counts[j] ? 1 : -1;
    return strcmp(ips[i], ips[j]);
}

/* The source address of a "sshd[PID]: Failed password for [invalid user ]USER from IP port N"
   line, or NULL. */
static int failed_ip(const char *line, char *ip) {
    const char *p = strstr(line, "sshd[");
    while (p) {
        const char *q = p + 5;
        if (isdigit((unsigned char)*q)) {
            while (isdigit((unsigned char)*q)) q++;
            if (strncmp(q, "]: Failed password for ", 23) == 0) {
                q += 23;
                if (strncmp(q, "invalid user ", 13) == 0) q += 13;
                const char *sp = strchr(q, ' ');
                if (sp && sp > q && strncmp(sp, " from ", 6) == 0) {
                    const char *a = sp + 6, *e = strchr(a, ' ');
                    if (e && e > a && e - a < 64 && strncmp(e, " port ", 6) == 0
                        && isdigit((unsigned char)e[6])) {
                        memcpy(ip, a, e - a);
                        ip[e - a] = 0;
                        return 1;
                    }
                }
            }
        }
        p = strstr(p + 1, "sshd[");
    }
    return 0;
}

int main(int argc, char **argv) {
    char line[4096], ip[64];
    for (int a = 1; a < argc; a++) {
        FILE *fp = fopen(argv[a], "r");
        if (!fp) { perror(argv[a]); return 1; }
        while (fgets(line, sizeof line, fp)) {
            if (!failed_ip(line, ip)) continue;
            long i;
            for (i = 0; i < n && strcmp(ips[i], ip) != 0; i++) {}
            if (i == n) { strcpy(ips[n], ip); counts[n++] = 0; }
            counts[i]++;
        }
        fclose(fp);
    }
    long *idx = malloc((n + 1) * sizeof *idx);
    for (long i = 0; i < n; i++) idx[i] = i;
    qsort(idx, n, sizeof *idx, order);
    for (long i = 0; i < n; i++) printf("%ld %s\n", counts[idx[i]], ips[idx[i]]);
    return 0;
}
