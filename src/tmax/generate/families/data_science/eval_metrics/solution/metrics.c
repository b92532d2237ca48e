#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 20000
#define MAXK 64
static char labels[MAXK][64];
static int k, n, truth[MAXR], pred[MAXR];
static double score[MAXR];
static long matrix[MAXK][MAXK];

static void norm(char *s) {
    char *start = s;
    while (*start == ' ' || *start == '\t') start++;
    memmove(s, start, strlen(start) + 1);
    size_t len = strlen(s);
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r')) s[--len] = 0;
    for (char *p = s; *p; p++) *p = (char)tolower((unsigned char)*p);
}

static int label_of(const char *s) {
    for (int i = 0; i < k; i++)
        if (strcmp(labels[i], s) == 0) return i;
    strncpy(labels[k], s, 63);
    return k++;
}

static int cmp_label(const void *a, const void *b) {
    return strcmp(labels[*(const int *)a], labels[*(const int *)b]);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    FILE *in = fopen(argv[1], "r");
    if (!in) return 1;
    char line[4096];
    int first = 1;
    while (fgets(line, sizeof line, in) && n < MAXR) {
        if (first) { first = 0; continue; }
        line[strcspn(line, "\n")] = 0;
        char *cells[5] = {0};
        int m = 0;
        char *p = line;
        while (m < 5) {
            cells[m++] = p;
            char *c = strchr(p, ',');
            if (!c) break;
            *c = 0;
            p = c + 1;
        }
        if (m < 3) continue;
        norm(cells[1]);
        norm(cells[2]);
        if (!cells[1][0]) continue;
        truth[n] = label_of(cells[1]);
        pred[n] = label_of(cells[2]);
        score[n] = (m > 3 && cells[3][0]) ? atof(cells[3]) : 0.0;
        n++;
    }
    fclose(in);
    int order[MAXK];
    for (int i = 0; i < k; i++) order[i] = i;
    qsort(order, k, sizeof(int), cmp_label);
    for (int i = 0; i < n; i++) matrix[truth[i]][pred[i]]++;
    const char *report = argv[2];
    if (strcmp(report, "confusion") == 0) {
        printf("truth");
        for (int j = 0; j < k; j++) printf(",%s", labels[order[j]]);
        printf("\n");
        for (int i = 0; i < k; i++) {
            printf("%s", labels[order[i]]);
            for (int j = 0; j < k; j++) printf(",%ld", matrix[order[i]][order[j]]);
            printf("\n");
        }
        return 0;
    }
    if (strcmp(report, "auc") == 0 && argc > 3) {
        char positive[64];
        strncpy(positive, argv[3], 63);
        positive[63] = 0;
        norm(positive);
        long twice = 0, np = 0, nn = 0;
        for (int i = 0; i < n; i++) {
            if (strcmp(labels[truth[i]], positive) != 0) continue;
            np++;
            for (int j = 0; j < n; j++)
                if (strcmp(labels[truth[j]], positive) != 0)
                    twice += score[i] > score[j] ? 2 : (score[i] == score[j] ? 1 : 0);
        }
        for (int j = 0; j < n; j++)
            if (strcmp(labels[truth[j]], positive) != 0) nn++;
        printf("%.4f\n", (double)twice / (double)(2 * np * nn));
        return 0;
    }
    int per_class = strcmp(report, "per_class") == 0;
    if (per_class) printf("label,precision,recall,f1,support\n");
    double total = 0;
    long hits = 0;
    for (int i = 0; i < k; i++) {
        int a = order[i];
        long tp = matrix[a][a], predicted = 0, support = 0;
        for (int j = 0; j < k; j++) {
            predicted += matrix[j][a];
            support += matrix[a][j];
        }
        hits += tp;
        double pr = predicted ? (double)tp / predicted : 0, rc = support ? (double)tp / support : 0;
        double f1 = pr + rc > 0 ? 2 * pr * rc / (pr + rc) : 0;
        total += f1;
        if (per_class) printf("%s,%.4f,%.4f,%.4f,%ld\n", labels[a], pr, rc, f1, support);
    }
    if (strcmp(report, "summary") == 0)
        printf("{\"accuracy\": %.4f, \"macro_f1\": %.4f, \"rows\": %d}\n", (double)hits / n,
               total / k, n);
    return 0;
}
