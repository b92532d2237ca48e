/* Replay key-value journals given as arguments; print the final state
   (key=value lines, by key). Counters go to standard error.
   At level 4 a first argument ending in .kv is a snapshot. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEVEL {{ level }}

typedef struct {
    char *key, *value;
} Entry;

static Entry *table;
static size_t used, room;
static long applied, errors, rolled;

static char *copy(const char *s) {
    char *out = malloc(strlen(s) + 1);
    strcpy(out, s);
    return out;
}

static long find(const char *key) {
    for (size_t i = 0; i < used; i++)
        if (!strcmp(table[i].key, key)) return (long)i;
    return -1;
}

static void put(const char *key, const char *value) {
    long i = find(key);
    char *fresh = copy(value);
    if (i >= 0) {
        free(table[i].value);
        table[i].value = fresh;
        return;
    }
    if (used == room) {
        room = room ? room * 2 : 64;
        table = realloc(table, room * sizeof *table);
    }
    table[used].key = copy(key);
    table[used++].value = fresh;
}

static void drop(const char *key) {
    long i = find(key);
    if (i < 0) return;
    free(table[i].key);
    free(table[i].value);
    table[i] = table[--used];
}

static int is_int(const char *s) {
    if (*s == '-') s++;
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

static void apply(char *line) {
    char *key = strchr(line, ' ');
    if (!key) return;
    *key++ = 0;
    char *arg = strchr(key, ' ');
    if (arg) *arg++ = 0;
    else arg = "";
    long i = find(key);
    if (!strcmp(line, "SET")) {
        put(key, arg);
    } else if (!strcmp(line, "DEL")) {
        drop(key);
    } else if (!strcmp(line, "INCR")) {
        const char *current = i >= 0 ? table[i].value : "0";
        if (!is_int(current)) {
            errors++;
            return;
        }
        char number[32];
        snprintf(number, sizeof number, "%lld", atoll(current) + atoll(arg));
        put(key, number);
    } else if (!strcmp(line, "APPEND")) {
        const char *current = i >= 0 ? table[i].value : "";
        char *joined = malloc(strlen(current) + strlen(arg) + 1);
        strcpy(joined, current);
        strcat(joined, arg);
        put(key, joined);
        free(joined);
    } else {
        return;
    }
    applied++;
}

static int by_key(const void *a, const void *b) {
    return strcmp(((const Entry *)a)->key, ((const Entry *)b)->key);
}

static int blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ') return 0;
    return 1;
}

int main(int argc, char **argv) {
    static char line[65536];
    int first = 1;
    size_t n;
    if (LEVEL >= 4 && argc > 1 && (n = strlen(argv[1])) > 3 && !strcmp(argv[1] + n - 3, ".kv")) {
        FILE *in = fopen(argv[1], "r");
        if (!in) return perror(argv[1]), 1;
        while (fgets(line, sizeof line, in)) {
            line[strcspn(line, "\n")] = 0;
            if (!line[0] || line[0] == '#') continue;
            char *eq = strchr(line, '=');
            if (!eq) continue;
            *eq = 0;
            put(line, eq + 1);
        }
        fclose(in);
        first = 2;
    }
    for (int a = first; a < argc; a++) {
        FILE *in = fopen(argv[a], "r");
        if (!in) return perror(argv[a]), 1;
        char **pending = NULL;
        size_t count = 0;
        int intx = 0;
        while (fgets(line, sizeof line, in)) {
            line[strcspn(line, "\n")] = 0;
            if (blank(line) || line[0] == '#') continue;
            if (LEVEL >= 3 && !strcmp(line, "BEGIN")) {
                intx = 1;
                count = 0;
                continue;
            }
            if (LEVEL >= 3 && !strcmp(line, "COMMIT")) {
                for (size_t i = 0; i < count; i++) {
                    apply(pending[i]);
                    free(pending[i]);
                }
                intx = 0;
                count = 0;
                continue;
            }
            if (LEVEL >= 3 && !strcmp(line, "ROLLBACK")) {
                for (size_t i = 0; i < count; i++) free(pending[i]);
                rolled++;
                intx = 0;
                count = 0;
                continue;
            }
            if (intx) {
                pending = realloc(pending, (count + 1) * sizeof *pending);
                pending[count++] = copy(line);
            } else {
                apply(line);
            }
        }
        if (intx) rolled++;
        free(pending);
        fclose(in);
    }
    qsort(table, used, sizeof *table, by_key);
    for (size_t i = 0; i < used; i++) printf("%s=%s\n", table[i].key, table[i].value);
    fprintf(stderr, "applied %ld\nerrors %ld\n", applied, errors);
    if (LEVEL >= 3) fprintf(stderr, "rolled_back %ld\n", rolled);
    fprintf(stderr, "keys %zu\n", used);
    return 0;
}
