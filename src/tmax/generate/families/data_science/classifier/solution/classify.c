#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXD 16
#define MAXK 16
#define MAXR 20000

static char labels[MAXK][64];
static int k, d;
static double sum[MAXK][MAXD], cnt[MAXK][MAXD], mean[MAXK][MAXD], var[MAXD], seen[MAXD];
static double vals[MAXR][MAXD];
static char has[MAXR][MAXD];
static int cls[MAXR];

/* Split a CSV line into at most max cells (empty cells kept); returns the count. */
static int split(char *line, char **cells, int max) {
    int n = 0;
    line[strcspn(line, "\r\n")] = 0;
    char *p = line;
    while (n < max) {
        cells[n++] = p;
        char *c = strchr(p, ',');
        if (!c) break;
        *c = 0;
        p = c + 1;
    }
    return n;
}

static int label_index(const char *s) {
    for (int i = 0; i < k; i++)
        if (strcmp(labels[i], s) == 0) return i;
    strncpy(labels[k], s, 63);
    return k++;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    char line[8192], *cells[MAXD + 2];
    FILE *in = fopen(argv[1], "r");
    if (!in) return 1;
    int r = 0, header = 1;
    while (fgets(line, sizeof line, in) && r < MAXR) {
        if (header) { header = 0; continue; }
        int m = split(line, cells, MAXD + 1);
        if (m < 2) continue;
        d = m - 1;
        int c = label_index(cells[d]);
        cls[r] = c;
        for (int i = 0; i < d; i++) {
            has[r][i] = cells[i][0] != 0;
            if (has[r][i]) {
                vals[r][i] = atof(cells[i]);
                sum[c][i] += vals[r][i];
                cnt[c][i] += 1;
            }
        }
        r++;
    }
    fclose(in);
    for (int c = 0; c < k; c++)
        for (int i = 0; i < d; i++) mean[c][i] = cnt[c][i] > 0 ? sum[c][i] / cnt[c][i] : 0;
    for (int j = 0; j < r; j++)
        for (int i = 0; i < d; i++)
            if (has[j][i]) {
                double e = vals[j][i] - mean[cls[j]][i];
                var[i] += e * e;
                seen[i] += 1;
            }
    for (int i = 0; i < d; i++) var[i] = (seen[i] > 0 ? var[i] / seen[i] : 0) + 1e-9;
    in = strcmp(argv[2], "-") == 0 ? stdin : fopen(argv[2], "r");
    if (!in) return 1;
    header = 1;
    while (fgets(line, sizeof line, in)) {
        if (header) { header = 0; continue; }
        int m = split(line, cells, MAXD + 1);
        int best = -1;
        double best_dist = 0;
        for (int c = 0; c < k; c++) {
            double dist = 0;
            for (int i = 0; i < d && i < m; i++)
                if (cells[i][0]) {
                    double e = atof(cells[i]) - mean[c][i];
                    dist += e * e / var[i];
                }
            if (best < 0 || dist < best_dist ||
                (dist == best_dist && strcmp(labels[c], labels[best]) < 0)) {
                best = c;
                best_dist = dist;
            }
        }
        printf("%s\n", best >= 0 ? labels[best] : "");
        fflush(stdout);
    }
    return 0;
}
