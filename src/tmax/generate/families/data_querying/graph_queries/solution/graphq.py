import sys
from collections import deque


def load(path):
    adj = {}
    with open(path) as handle:
        next(handle, None)
        for line in handle:
            line = line.strip()
            if "," not in line:
                continue
            a, b = line.split(",", 1)
            adj.setdefault(a, set())
            adj.setdefault(b, set())
            if a != b:
                adj[a].add(b)
                adj[b].add(a)
    return adj


def bfs(adj, start):
    dist, queue = {start: 0}, deque([start])
    while queue:
        u = queue.popleft()
        for v in adj[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def main():
    adj, mode = load(sys.argv[1]), sys.argv[2]
    if mode == "degrees":
        print("node,degree")
        for node in sorted(adj, key=lambda n: (-len(adj[n]), n)):
            print(f"{node},{len(adj[node])}")
    elif mode == "components":
        seen, comps = set(), []
        for node in sorted(adj):
            if node not in seen:
                members = sorted(bfs(adj, node))
                seen.update(members)
                comps.append(members)
        for members in sorted(comps, key=lambda m: (-len(m), m[0])):
            print(" ".join(members))
    elif mode == "dist":
        dist = bfs(adj, sys.argv[3])
        print("node,hops")
        for node in sorted(dist, key=lambda n: (dist[n], n)):
            print(f"{node},{dist[node]}")
    elif mode == "path":
        src, dst = sys.argv[3], sys.argv[4]
        dist = bfs(adj, dst) if dst in adj else {}
        if src not in dist:
            print("none")
            return
        path = [src]
        while path[-1] != dst:
            here = path[-1]
            path.append(min(v for v in adj[here] if dist.get(v) == dist[here] - 1))
        print(" -> ".join(path))


main()
