#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long table[{{ size }}] = { {{- values -}} };

int main(void) {
    char line[512], op[32];
    long a, b;
    int n = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        n++;
        if (line[0] == '#' || line[0] == '\n') {
            printf("line %d: skip\n", n);
            continue;
        }
        int got = sscanf(line, "%31s %ld %ld", op, &a, &b);
        if (got >= 3 && strcmp(op, "{{ add }}") == 0) {
            printf("line %d: %ld\n", n, a + b);
        } else if (got >= 3 && strcmp(op, "{{ div }}") == 0) {
            volatile long num = a, den = b;
            printf("line %d: %ld\n", n, num / den);
        } else if (got >= 2 && strcmp(op, "{{ get }}") == 0) {
            if (a < 0 || a >= {{ size }} + {{ slack }}) raise(SIGSEGV);
            printf("line %d: %ld\n", n, a < {{ size }} ? table[a] : 0L);
        } else {
            fprintf(stderr, "bad instruction at line %d\n", n);
            return {{ badexit }};
        }
    }
    return 0;
}
