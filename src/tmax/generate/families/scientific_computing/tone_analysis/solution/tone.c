#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODE_FREQ {{ freq }}
#define LEVEL {{ level }}
#define THRESHOLD {{ threshold }}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: tone FILE\n"); return 2; }
    FILE *fp = fopen(argv[1], "rb");
    if (!fp) { perror(argv[1]); return 1; }
    long cap = 1 << 16, n = 0, rate = 0;
    long *x = malloc(cap * sizeof *x);
    size_t len = strlen(argv[1]);
    if (len > 4 && strcmp(argv[1] + len - 4, ".wav") == 0) {
        unsigned char head[44], b[2];
        if (fread(head, 1, 44, fp) != 44) return 1;
        rate = head[24] | head[25] << 8 | head[26] << 16 | (long)head[27] << 24;
        while (fread(b, 1, 2, fp) == 2) {
            if (n == cap) x = realloc(x, (cap *= 2) * sizeof *x);
            x[n++] = (short)(b[0] | b[1] << 8);
        }
    } else {
        char word[32];
        long v;
        if (fscanf(fp, "%31s %ld", word, &rate) != 2) return 1;
        while (fscanf(fp, "%ld", &v) == 1) {
            if (n == cap) x = realloc(x, (cap *= 2) * sizeof *x);
            x[n++] = v;
        }
    }
    fclose(fp);
    long peak = 0, cr = 0, over = 0;
    long long sum = 0, ss = 0;
    for (long i = 0; i < n; i++) {
        long a = labs(x[i]);
        if (a > peak) peak = a;
        sum += x[i];
        ss += (long long)x[i] * x[i];
        if (i > 0 && ((x[i - 1] < 0) != (x[i] < 0))) cr++;
        if (a > THRESHOLD) over++;
    }
    if (MODE_FREQ) {
        double h = 0.3 * peak, first = 0, last = 0;
        int armed = 0;
        long cnt = 0;
        for (long i = 1; i < n; i++) {
            if (x[i - 1] < -h) armed = 1;
            if (armed && x[i - 1] < 0 && x[i] >= 0) {
                double t = (i - 1) + (double)x[i - 1] / (double)(x[i - 1] - x[i]);
                if (cnt == 0) first = t;
                last = t;
                cnt++;
                armed = 0;
            }
        }
        printf("%.2f\n", (cnt - 1) * (double)rate / (last - first));
        return 0;
    }
    printf("samples=%ld peak=%ld", n, peak);
    if (LEVEL >= 2) {
        long long m = ss / n, r = (long long)sqrt((double)m);
        while (r * r > m) r--;
        while ((r + 1) * (r + 1) <= m) r++;
        printf(" rms=%lld", r);
    }
    if (LEVEL >= 3) printf(" crossings=%ld over=%ld", cr, over);
    if (LEVEL >= 4) printf(" mean=%lld", sum / n);
    printf("\n");
    free(x);
    return 0;
}
