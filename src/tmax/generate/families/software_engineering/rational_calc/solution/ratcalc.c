/* Evaluate one arithmetic expression per input line exactly; print p/q, p or ERROR. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    long long n, d;
} Q;

static const char *s;
static int failed;

static long long gcd(long long a, long long b) {
    if (a < 0) a = -a;
    while (b) {
        long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static Q norm(long long n, long long d) {
    if (d < 0) n = -n, d = -d;
    long long g = gcd(n, d);
    if (g > 1) n /= g, d /= g;
    return (Q){n, d};
}

static void skip(void) {
    while (*s == ' ') s++;
}

static Q expr(void);

static Q atom(void) {
    skip();
    if (*s == '(') {
        s++;
        Q v = expr();
        skip();
        if (*s == ')') s++;
        return v;
    }
    long long v = 0;
    while (isdigit((unsigned char)*s)) v = v * 10 + (*s++ - '0');
    return (Q){v, 1};
}

static Q power(void) {
    Q base = atom();
    skip();
    if (*s != '^') return base;
    s++;
    skip();
    int sign = 1;
    if (*s == '-') sign = -1, s++;
    skip();
    long long e = 0;
    while (isdigit((unsigned char)*s)) e = e * 10 + (*s++ - '0');
    if (sign < 0) {
        if (base.n == 0) {
            failed = 1;
            return base;
        }
        base = norm(base.d, base.n);
    }
    Q out = {1, 1};
    for (long long k = 0; k < e; k++) out.n *= base.n, out.d *= base.d;
    return norm(out.n, out.d);
}

static Q unary(void) {
    skip();
    if (*s == '-') {
        s++;
        Q v = unary();
        v.n = -v.n;
        return v;
    }
    return power();
}

static Q term(void) {
    Q v = unary();
    for (;;) {
        skip();
        char op = *s;
        if (op != '*' && op != '/') return v;
        s++;
        Q r = unary();
        if (op == '*') {
            v = norm(v.n * r.n, v.d * r.d);
        } else {
            if (r.n == 0) {
                failed = 1;
                return v;
            }
            v = norm(v.n * r.d, v.d * r.n);
        }
    }
}

static Q expr(void) {
    Q v = term();
    for (;;) {
        skip();
        char op = *s;
        if (op != '+' && op != '-') return v;
        s++;
        Q r = term();
        long long n = op == '+' ? v.n * r.d + r.n * v.d : v.n * r.d - r.n * v.d;
        v = norm(n, v.d * r.d);
    }
}

int main(void) {
    static char line[65536];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        s = line;
        failed = 0;
        Q v = expr();
        if (failed) puts("ERROR");
        else if (v.d == 1) printf("%lld\n", v.n);
        else printf("%lld/%lld\n", v.n, v.d);
    }
    return 0;
}
