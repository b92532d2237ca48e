#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 20000
static char *names[MAXN];
static int *adj[MAXN], deg[MAXN], cap[MAXN], dist[MAXN], queue_[MAXN], order[MAXN];
static int label[MAXN], first[MAXN], size[MAXN], comps[MAXN];
static int n;

static int find(const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

static int intern(const char *s) {
    int i = find(s);
    if (i >= 0) return i;
    size_t len = strlen(s) + 1;
    names[n] = malloc(len);
    memcpy(names[n], s, len);
    return n++;
}

static int linked(int a, int b) {
    for (int i = 0; i < deg[a]; i++)
        if (adj[a][i] == b) return 1;
    return 0;
}

static void add(int a, int b) {
    if (deg[a] == cap[a]) {
        cap[a] = cap[a] ? 2 * cap[a] : 4;
        adj[a] = realloc(adj[a], cap[a] * sizeof(int));
    }
    adj[a][deg[a]++] = b;
}

static void bfs(int s) {
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++) dist[i] = -1;
    dist[s] = 0;
    queue_[tail++] = s;
    while (head < tail) {
        int u = queue_[head++];
        for (int k = 0; k < deg[u]; k++) {
            int v = adj[u][k];
            if (dist[v] < 0) {
                dist[v] = dist[u] + 1;
                queue_[tail++] = v;
            }
        }
    }
}

static int by_degree(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    if (deg[a] != deg[b]) return deg[b] - deg[a];
    return strcmp(names[a], names[b]);
}

static int by_name(const void *x, const void *y) {
    return strcmp(names[*(const int *)x], names[*(const int *)y]);
}

static int by_dist(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    if (dist[a] != dist[b]) return dist[a] - dist[b];
    return strcmp(names[a], names[b]);
}

static int by_comp(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    if (size[a] != size[b]) return size[b] - size[a];
    return strcmp(names[first[a]], names[first[b]]);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    FILE *in = fopen(argv[1], "r");
    if (!in) return 1;
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof line, in)) {
        if (lineno++ == 0) continue;
        line[strcspn(line, "\r\n")] = 0;
        char *comma = strchr(line, ',');
        if (!comma) continue;
        *comma = 0;
        int a = intern(line), b = intern(comma + 1);
        if (a != b && !linked(a, b)) {
            add(a, b);
            add(b, a);
        }
    }
    fclose(in);
    for (int i = 0; i < n; i++) order[i] = i;
    const char *mode = argv[2];
    if (strcmp(mode, "degrees") == 0) {
        qsort(order, n, sizeof(int), by_degree);
        printf("node,degree\n");
        for (int i = 0; i < n; i++) printf("%s,%d\n", names[order[i]], deg[order[i]]);
    } else if (strcmp(mode, "components") == 0) {
        qsort(order, n, sizeof(int), by_name);
        int c = 0;
        for (int i = 0; i < n; i++) label[i] = -1;
        for (int i = 0; i < n; i++) {
            int s = order[i];
            if (label[s] >= 0) continue;
            bfs(s);
            first[c] = s;
            size[c] = 0;
            for (int v = 0; v < n; v++)
                if (dist[v] >= 0) {
                    label[v] = c;
                    size[c]++;
                }
            comps[c] = c;
            c++;
        }
        qsort(comps, c, sizeof(int), by_comp);
        for (int k = 0; k < c; k++) {
            int printed = 0;
            for (int i = 0; i < n; i++)
                if (label[order[i]] == comps[k])
                    printf(printed++ ? " %s" : "%s", names[order[i]]);
            printf("\n");
        }
    } else if (strcmp(mode, "dist") == 0 && argc > 3) {
        printf("node,hops\n");
        int s = find(argv[3]);
        if (s < 0) return 0;
        bfs(s);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (dist[i] >= 0) order[m++] = i;
        qsort(order, m, sizeof(int), by_dist);
        for (int i = 0; i < m; i++) printf("%s,%d\n", names[order[i]], dist[order[i]]);
    } else if (strcmp(mode, "path") == 0 && argc > 4) {
        int s = find(argv[3]), t = find(argv[4]);
        if (s < 0 || t < 0) {
            printf("none\n");
            return 0;
        }
        bfs(t);
        if (dist[s] < 0) {
            printf("none\n");
            return 0;
        }
        printf("%s", names[s]);
        int u = s;
        while (u != t) {
            int best = -1;
            for (int k = 0; k < deg[u]; k++) {
                int v = adj[u][k];
                if (dist[v] == dist[u] - 1 && (best < 0 || strcmp(names[v], names[best]) < 0))
                    best = v;
            }
            u = best;
            printf(" -> %s", names[u]);
        }
        printf("\n");
    }
    return 0;
}
