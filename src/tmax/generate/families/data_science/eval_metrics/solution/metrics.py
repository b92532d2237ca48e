import sys


def norm(text):
    return text.strip().lower()


def main():
    path, report = sys.argv[1], sys.argv[2]
    rows = []
    with open(path) as handle:
        header = handle.readline().rstrip("\n").split(",")
        for line in handle:
            cells = line.rstrip("\n").split(",")
            if len(cells) < 3:
                continue
            truth, pred = norm(cells[1]), norm(cells[2])
            if truth == "":
                continue
            score = float(cells[3]) if len(cells) > 3 and cells[3] != "" else 0.0
            rows.append((truth, pred, score))
    labels = sorted({t for t, _, _ in rows} | {p for _, p, _ in rows})
    matrix = {(a, b): 0 for a in labels for b in labels}
    for t, p, _ in rows:
        matrix[(t, p)] += 1
    if report == "confusion":
        print("truth," + ",".join(labels))
        for a in labels:
            print(a + "," + ",".join(str(matrix[(a, b)]) for b in labels))
        return
    f1s = []
    lines = ["label,precision,recall,f1,support"]
    for lab in labels:
        tp = matrix[(lab, lab)]
        predicted = sum(matrix[(a, lab)] for a in labels)
        support = sum(matrix[(lab, b)] for b in labels)
        precision = tp / predicted if predicted else 0.0
        recall = tp / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        f1s.append(f1)
        lines.append(f"{lab},{precision:.4f},{recall:.4f},{f1:.4f},{support}")
    if report == "per_class":
        print("\n".join(lines))
    elif report == "summary":
        total = 0.0
        for f1 in f1s:
            total += f1
        acc = sum(matrix[(a, a)] for a in labels) / len(rows)
        print(f'{% raw %}{{{% endraw %}"accuracy": {acc:.4f}, "macro_f1": {total / len(labels):.4f}, '
              f'"rows": {len(rows)}}}')
    elif report == "auc":
        positive = norm(sys.argv[3])
        pos = [s for t, _, s in rows if t == positive]
        neg = [s for t, _, s in rows if t != positive]
        twice = sum(2 if a > b else 1 if a == b else 0 for a in pos for b in neg)
        print(f"{twice / (2 * len(pos) * len(neg)):.4f}")


main()
