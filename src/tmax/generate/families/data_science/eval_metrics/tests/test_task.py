{{ prelude }}
import re

HERE = os.path.dirname(__file__)


def compute(text, report, positive=""):
    rows = []
    for line in text.splitlines()[1:]:
        cells = line.split(",")
        if len(cells) < 3 or cells[1].strip() == "":
            continue
        score = float(cells[3]) if len(cells) > 3 and cells[3] else 0.0
        rows.append((cells[1].strip().lower(), cells[2].strip().lower(), score))
    labels = sorted({r[0] for r in rows} | {r[1] for r in rows})
    m = {(a, b): 0 for a in labels for b in labels}
    for t, p, _ in rows:
        m[(t, p)] += 1
    if report == "confusion":
        out = "truth," + ",".join(labels) + "\n"
        for a in labels:
            out += a + "," + ",".join(str(m[(a, b)]) for b in labels) + "\n"
        return out
    if report == "auc":
        pos = [s for t, _, s in rows if t == positive]
        neg = [s for t, _, s in rows if t != positive]
        twice = sum(2 if a > b else (1 if a == b else 0) for a in pos for b in neg)
        return "%.4f\n" % (twice / (2 * len(pos) * len(neg)))
    out, total = "label,precision,recall,f1,support\n", 0.0
    for lab in labels:
        tp = m[(lab, lab)]
        predicted = sum(m[(a, lab)] for a in labels)
        support = sum(m[(lab, b)] for b in labels)
        pr = tp / predicted if predicted else 0.0
        rc = tp / support if support else 0.0
        f1 = 2 * pr * rc / (pr + rc) if pr + rc > 0 else 0.0
        total += f1
        out += "%s,%.4f,%.4f,%.4f,%d\n" % (lab, pr, rc, f1, support)
    if report == "per_class":
        return out
    acc = sum(m[(a, a)] for a in labels) / len(rows)
    return '{"accuracy": %.4f, "macro_f1": %.4f, "rows": %d}\n' % (acc, total / len(labels),
                                                                    len(rows))


def reports(level, positive):
    out = [("confusion.csv", "confusion", ())]
    if level >= 2:
        out.append(("per_class.csv", "per_class", ()))
    if level >= 3:
        out.append(("summary.json", "summary", ()))
    if level >= 4:
        out.append(("auc.txt", "auc", (positive,)))
    return out


def test_report_files():
    text = read(os.path.join(HERE, "predictions.csv"))
    for name, report, args in reports(CFG["level"], CFG["positive"]):
        want, got = compute(text, report, *args), read(CFG["out"] + "/" + name)
        if name.endswith(".json"):
            assert json.loads(got) == json.loads(want), f"{name}: want {want} got {got}"
            decimals = re.findall(r"[0-9]+[.][0-9]+", got)
            assert decimals == re.findall(r"[0-9]+[.][0-9]+", want), f"{name}: 4 decimals: {got}"
            one_line = got.endswith("\n") and got.count("\n") == 1
            assert one_line, f"{name}: one line ending with a newline, got {got!r}"
        else:
            assert got == want, f"{CFG['out']}/{name} differs.\nexpected:\n{want}\ngot:\n{got}"


def fresh(rng, level):
    labels = rng.sample(["cat", "dog", "fox", "owl", "elk", "bee"], rng.randint(2, 4))
    lines = [CFG["columns"]]  # the task's own column names
    for i in range(rng.randint(8, 120)):
        truth = rng.choice(labels)
        pred = truth if rng.random() < 0.7 else rng.choice(labels)
        if level >= 3 and rng.random() < 0.2:
            truth = " " + truth.upper() if rng.random() < 0.5 else truth.capitalize() + " "
        if level >= 4 and rng.random() < 0.05:
            truth = ""
        cells = [str(i + 1), truth, pred]
        if level >= 4:
            cells.append("%.2f" % rng.random() if rng.random() < 0.9 else "0.50")
        lines.append(",".join(cells))
    lines.append(f"{len(lines)},{labels[0]},{labels[0]}" + (",0.99" if level >= 4 else ""))
    lines.append(f"{len(lines)},{labels[1]},{labels[0]}" + (",0.01" if level >= 4 else ""))
    return "\n".join(lines) + "\n", labels[0]


def test_program_equivalence():
    if not CFG["code"]:
        return
    rng = random.Random(2024)
    work = tempfile.mkdtemp()
    for case in range(CFG["cases"]):
        text, positive = fresh(rng, CFG["level"])
        path = os.path.join(work, f"p{case}.csv")
        with open(path, "w") as handle:
            handle.write(text)
        for _, report, args in reports(CFG["level"], positive):
            done = run_program([path, report, *args])
            want = compute(text, report, *args)
            assert done.returncode == 0, f"case {case} {report}: exit {done.returncode}"
            assert done.stdout == want, (
                f"case {case} `{report}` on\n{text}\nexpected:\n{want}\ngot:\n{done.stdout}"
            )
