/* Print the build order of a manifest (`name: dep dep` lines), one package per line. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXP 4096

static char *names[MAXP];
static char *deplist[MAXP];
static int count;

static int cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int lookup(const char *name) {
    for (int i = 0; i < count; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}

int main(int argc, char **argv) {
    static char line[65536];
    if (argc < 2) return 2;
    FILE *in = fopen(argv[1], "r");
    if (!in) return perror(argv[1]), 1;
    char *raw_names[MAXP], *raw_deps[MAXP];
    int raw = 0;
    while (fgets(line, sizeof line, in) && raw < MAXP) {
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        s[strcspn(s, "\r\n")] = 0;
        if (!*s || *s == '#') continue;
        char *colon = strchr(s, ':');
        char *rest = colon ? colon + 1 : s + strlen(s);
        if (colon) *colon = 0;
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
        raw_names[raw] = strdup(s);
        raw_deps[raw++] = strdup(rest);
    }
    fclose(in);
    for (int i = 0; i < raw; i++) names[count++] = raw_names[i];
    qsort(names, count, sizeof names[0], cmp);
    for (int i = 0; i < count; i++)
        for (int j = 0; j < raw; j++)
            if (names[i] == raw_names[j]) deplist[i] = raw_deps[j];
    /* requirement indexes per package (-1 for third-party names) */
    int *reqs[MAXP], nreq[MAXP];
    for (int i = 0; i < count; i++) {
        reqs[i] = malloc(sizeof(int) * (strlen(deplist[i]) / 2 + 1));
        nreq[i] = 0;
        char *copy = strdup(deplist[i]);
        for (char *tok = strtok(copy, " \t"); tok; tok = strtok(NULL, " \t")) {
            int k = lookup(tok);
            if (k >= 0) reqs[i][nreq[i]++] = k;
        }
        free(copy);
    }
    static char built[MAXP];
    for (;;) {
        int picked = -1;
        for (int i = 0; i < count && picked < 0; i++) {
            if (built[i]) continue;
            int ready = 1;
            for (int k = 0; k < nreq[i]; k++)
                if (!built[reqs[i][k]]) ready = 0;
            if (ready) picked = i;
        }
        if (picked < 0) break;
        built[picked] = 1;
        puts(names[picked]);
    }
    return 0;
}
