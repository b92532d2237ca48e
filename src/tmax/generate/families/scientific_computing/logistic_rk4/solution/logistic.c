#include <math.h>
#include <stdio.h>
#include <string.h>

#define METRIC {{ metric }}

static double r, k;
static double f(double y) { return r * y * (1 - y / k); }

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: logistic CASES\n"); return 2; }
    FILE *fp = fopen(argv[1], "r");
    if (!fp) { perror(argv[1]); return 1; }
    char line[512], name[128];
    while (fgets(line, sizeof line, fp)) {
        double y, h;
        long n;
        if (line[0] == '#') continue;
        if (sscanf(line, "%127s %lf %lf %lf %lf %ld", name, &r, &k, &y, &h, &n) != 6) continue;
        if (METRIC) {
            printf("%s %.10g\n", name, k / (1 + (k - y) / y * exp(-r * h * n)));
            continue;
        }
        for (long i = 0; i < n; i++) {
            double f1 = f(y), f2 = f(y + h / 2 * f1), f3 = f(y + h / 2 * f2);
            double f4 = f(y + h * f3);
            y = y + h / 6 * (f1 + 2 * f2 + 2 * f3 + f4);
        }
        printf("%s %.6f\n", name, y);
    }
    fclose(fp);
    return 0;
}
