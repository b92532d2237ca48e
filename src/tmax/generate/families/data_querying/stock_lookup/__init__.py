"""Stock and price queries over warehouse CSVs, as a tool and a service."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    PROGRAM_SERVER_PY,
    bullets,
    code_note,
    invoke,
    minimal_test_file,
    program_path,
    program_setup,
    wait_port,
)
from tmax.generate.family import Draft, Family, RenderContext, register

_STOCK_GEN = """
def make_stock(rng, level, n_skus, warehouses):
    skus = sorted(rng.sample(["%s%03d" % (c, i) for c in "ABKMTZ" for i in range(1000)], n_skus))
    whs = rng.sample(warehouses, min(len(warehouses), 2 + level))
    have, files = {}, {}
    rows = []
    for sku in skus:
        for wh in rng.sample(whs, rng.randint(1, len(whs))):
            qty = rng.randint(0, 60)
            have[(sku, wh)] = have.get((sku, wh), 0) + qty
            rows.append((sku, wh, qty))
    rows.append(rows[rng.randrange(len(rows))][:2] + (rng.randint(1, 9),))
    files["stock.csv"] = "sku,warehouse,qty\\n" + "".join("%s,%s,%d\\n" % r for r in rows)
    if level >= 2:
        unpriced = rng.choice(sorted({s for s, _, q in rows if q > 0} or skus))
        priced = [s for s in skus if s != unpriced and rng.random() < 0.9]
        files["prices.csv"] = "sku,price_cents\\n" + "".join(
            "%s,%d\\n" % (s, rng.randint(1, 400) * 5) for s in priced)
    if level >= 3:
        moves = []
        for _ in range(n_skus):
            sku, wh = rng.choice(skus), rng.choice(whs)
            moves.append((sku, wh, rng.randint(-have.get((sku, wh), 0), 25)))
            have[(sku, wh)] = have.get((sku, wh), 0) + moves[-1][2]
        files["moves.csv"] = "sku,warehouse,delta\\n" + "".join("%s,%s,%d\\n" % m for m in moves)
    queries = []
    for _ in range(4 + 3 * level):
        kind = rng.choice(["STOCK", "VALUE", "WAREHOUSE", "LOW"][:level])
        if kind == "STOCK":
            queries.append("STOCK " + (rng.choice(skus) if rng.random() < 0.85 else "Q999"))
        elif kind == "LOW":
            queries.append("LOW %d" % rng.randint(5, 80))
        else:
            queries.append(kind + " " + (rng.choice(whs) if rng.random() < 0.85 else "xyz"))
    # every query file asks for an unknown sku and a malformed query, and from level 2
    # for an unknown warehouse and the value of a warehouse holding the unpriced sku
    queries += ["STOCK Q999", rng.choice(["PRICE ", "COUNT ", "FIND "]) + rng.choice(skus)]
    if level >= 2:
        queries += ["VALUE xyz"] + ["VALUE " + w for s, w, q in rows if s == unpriced and q > 0][:1]
    rng.shuffle(queries)
    return files, queries


def answer_all(files, queries):
    def rows(name):
        lines = files.get(name, "").splitlines()[1:]
        return [line.split(",") for line in lines if line]

    stock = {}
    for sku, wh, qty in rows("stock.csv") + rows("moves.csv"):
        stock[(sku, wh)] = stock.get((sku, wh), 0) + int(qty)
    price = {s: int(p) for s, p in rows("prices.csv")}
    skus = {s for s, _ in stock}
    whs = {w for _, w in stock}
    total = {}
    for (s, w), q in stock.items():
        total[s] = total.get(s, 0) + q
    out = []
    for query in queries:
        parts = query.split()
        cmd, arg = (parts + ["", ""])[:2]
        if cmd == "STOCK":
            out.append(str(total[arg]) if arg in skus else "UNKNOWN")
        elif cmd == "VALUE":
            if arg not in whs:
                out.append("UNKNOWN")
            else:
                out.append(str(sum(q * price.get(s, 0) for (s, w), q in stock.items() if w == arg)))
        elif cmd == "WAREHOUSE":
            if arg not in whs:
                out.append("UNKNOWN")
            else:
                held = [q for (s, w), q in stock.items() if w == arg and q > 0]
                out.append("%d %d" % (len(held), sum(held)))
        elif cmd == "LOW":
            low = sorted(s for s in skus if total[s] < int(arg))
            out.append(",".join(low) if low else "NONE")
        else:
            out.append("ERROR")
    return out
"""

_stock_ns: dict = {}
exec(_STOCK_GEN, _stock_ns)

_LOOKUP_PY = """import csv
import os
import sys


def rows(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return []
    with open(path, newline="") as handle:
        return list(csv.reader(handle))[1:]


def main():
    folder = sys.argv[1]
    stock = {}
    for sku, wh, qty in rows(folder, "stock.csv") + rows(folder, "moves.csv"):
        stock[(sku, wh)] = stock.get((sku, wh), 0) + int(qty)
    price = {sku: int(cents) for sku, cents in rows(folder, "prices.csv")}
    total = {}
    for (sku, _), qty in stock.items():
        total[sku] = total.get(sku, 0) + qty
    warehouses = {wh for _, wh in stock}
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        cmd, arg = parts[0], parts[1] if len(parts) > 1 else ""
        if cmd == "STOCK":
            reply = str(total[arg]) if arg in total else "UNKNOWN"
        elif cmd in ("VALUE", "WAREHOUSE") and arg not in warehouses:
            reply = "UNKNOWN"
        elif cmd == "VALUE":
            reply = str(sum(q * price.get(s, 0) for (s, w), q in stock.items() if w == arg))
        elif cmd == "WAREHOUSE":
            held = [q for (s, w), q in stock.items() if w == arg and q > 0]
            reply = f"{len(held)} {sum(held)}"
        elif cmd == "LOW" and arg.lstrip("-").isdigit():
            low = sorted(s for s in total if total[s] < int(arg))
            reply = ",".join(low) or "NONE"
        else:
            reply = "ERROR"
        print(reply, flush=True)


main()
"""

_LOOKUP_SH = r"""#!/bin/bash
# Answer stock queries (one per stdin line) from the CSV files in $1.
export LC_ALL=C
exec awk -v dir="$1" '
function load(file, kind,   line, f, seen) {
  seen = 0
  while ((getline line < file) > 0) {
    if (seen++ == 0) continue
    split(line, f, ",")
    if (kind == "price") { price[f[1]] = f[2] + 0; continue }
    stock[f[1] SUBSEP f[2]] += f[3]; total[f[1]] += f[3]; wh[f[2]] = 1
  }
  close(file)
}
BEGIN {
  load(dir "/stock.csv", "stock"); load(dir "/moves.csv", "stock"); load(dir "/prices.csv", "price")
}
{
  n = split($0, q, " ")
  if (n == 0) next
  cmd = q[1]; arg = q[2]
  if (cmd == "STOCK") reply = (arg in total) ? total[arg] : "UNKNOWN"
  else if ((cmd == "VALUE" || cmd == "WAREHOUSE") && !(arg in wh)) reply = "UNKNOWN"
  else if (cmd == "VALUE") {
    sum = 0
    for (key in stock) { split(key, k, SUBSEP); if (k[2] == arg) sum += stock[key] * price[k[1]] }
    reply = sum
  } else if (cmd == "WAREHOUSE") {
    cnt = 0; units = 0
    for (key in stock) {
      split(key, k, SUBSEP)
      if (k[2] == arg && stock[key] > 0) { cnt++; units += stock[key] }
    }
    reply = cnt " " units
  } else if (cmd == "LOW" && arg ~ /^-?[0-9]+$/) {
    m = 0
    for (s in total) if (total[s] < arg + 0) {
      m++; i = m
      while (i > 1 && low[i - 1] > s) { low[i] = low[i - 1]; i-- }
      low[i] = s
    }
    reply = "NONE"
    if (m > 0) { reply = low[1]; for (i = 2; i <= m; i++) reply = reply "," low[i] }
  } else reply = "ERROR"
  print reply
  fflush()
}'
"""

_LOOKUP_TESTS = """
HERE = os.path.dirname(__file__)


def pristine():
    files = {}
    for name in ("stock.csv", "prices.csv", "moves.csv"):
        path = os.path.join(HERE, name)
        if os.path.exists(path):
            files[name] = read(path)
    return files


def test_answers_file():
    queries = read(os.path.join(HERE, "queries.txt")).split("\\n")[:-1]
    want = answer_all(pristine(), queries)
    got = read("/app/answers.txt").split("\\n")
    assert got[-1] == "", "answers.txt must end with a newline"
    assert got[:-1] == want, f"answers.txt: expected {want}, got {got[:-1]}"


def hidden_queries(rng, files):
    skus = sorted({line.split(",")[0] for line in files["stock.csv"].splitlines()[1:]})
    whs = sorted({line.split(",")[1] for line in files["stock.csv"].splitlines()[1:]})
    out = ["STOCK " + s for s in rng.sample(skus, 3)] + ["STOCK NOPE1", "FROB x"]
    if CFG["level"] >= 2:
        out += ["VALUE " + w for w in whs] + ["VALUE nowhere"]
    if CFG["level"] >= 3:
        out += ["WAREHOUSE " + w for w in whs]
    if CFG["level"] >= 4:
        out += ["LOW %d" % rng.randint(1, 90) for _ in range(3)] + ["LOW 0"]
    rng.shuffle(out)
    return out


def test_program_on_fresh_data():
    if not CFG["code"]:
        return
    for seed in (3, 17):
        rng = random.Random(seed)
        files, _ = make_stock(rng, CFG["level"], 25, ["osl", "rix", "vno", "tll", "hel"])
        folder = tempfile.mkdtemp()
        for name, text in files.items():
            with open(os.path.join(folder, name), "w") as handle:
                handle.write(text)
        queries = hidden_queries(rng, files)
        done = run_program([folder], stdin="\\n".join(queries) + "\\n")
        assert done.returncode == 0, f"program failed: {done.stderr[-2000:]}"
        want = answer_all(files, queries)
        got = done.stdout.splitlines()
        assert got == want, f"queries {queries}: expected {want}, got {got}"


def test_service():
    if not CFG["service"]:
        return
    files = pristine()
    queries = hidden_queries(random.Random(99), files)
    want = answer_all(files, queries)
    got = line_queries(CFG["line_port"], queries)
    assert got == want, f"line protocol: queries {queries}: expected {want}, got {got}"
    if CFG["http_port"]:
        for query, answer in zip(queries, want):
            cmd, arg = query.split()
            if cmd not in ("STOCK", "VALUE", "WAREHOUSE", "LOW"):
                continue
            status, body = http_get(CFG["http_port"], f"/{cmd.lower()}/{arg}")
            assert " 200" in status, f"GET /{cmd.lower()}/{arg}: {status}"
            got = json.loads(body)
            assert got == {"query": query, "answer": answer}, f"GET /{cmd.lower()}/{arg}: {got}"
"""


@register
class StockLookup(Family):
    """Answer stock/price queries over warehouse CSVs; level adds price, movement and
    low-stock queries. Code asks for a query tool; services (or multi_protocol) ask for a
    query service on a line-protocol port (plus an HTTP/JSON port)."""

    name = "data_querying.stock_lookup"
    domain = "data_querying"
    verifier_kinds = frozenset({"exact_text", "multi_protocol"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    services = True
    rules = (
        Rule("answers_file", (r"Answer every query in `/app/queries\.txt` and write one answer per "
                              r"line, in order, to `/app/answers\.txt`",),
             (r"def test_answers_file\(",)),
        Rule("quantities_add",
             (r"a sku/warehouse pair may appear more than once, quantities add up",),
             (r"rows\.append\(rows\[rng\.randrange\(len\(rows\)\)\]\[:2\]",
              r"stock\[\(sku, wh\)\] = stock\.get\(\(sku, wh\), 0\) \+ int\(qty\)")),
        Rule("stock_query", (r"`STOCK <sku>`: total quantity of the sku over all warehouses",),
             (r'if cmd == "STOCK":',)),
        Rule("unknown_or_error", (r"An unknown sku or warehouse is answered `UNKNOWN`, any other "
                                  r"malformed query `ERROR`",),
             (r'queries \+= \["STOCK Q999", rng\.choice\(\["PRICE ', r'out\.append\("ERROR"\)')),
        Rule("value_query", (r"`VALUE <warehouse>`: sum of quantity × price_cents",),
             (r'elif cmd == "VALUE":',), levels=frozenset({2, 3, 4})),
        Rule("unpriced_zero", (r"a sku without a price counts as 0",),
             (r"priced = \[s for s in skus if s != unpriced", r"price\.get\(s, 0\)"),
             levels=frozenset({2, 3, 4})),
        Rule("moves_applied", (r"`/app/data/moves\.csv` \(`sku,warehouse,delta`: stock movements",),
             (r'files\["moves\.csv"\] = ', r'rows\("stock\.csv"\) \+ rows\("moves\.csv"\)'),
             levels=frozenset({3, 4})),
        Rule("warehouse_query", (r"`WAREHOUSE <warehouse>`: `<n> <units>`",),
             (r'elif cmd == "WAREHOUSE":',), levels=frozenset({3, 4})),
        Rule("low_query", (r"`LOW <n>`: the skus whose total quantity is below n",),
             (r'elif cmd == "LOW":',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/lookup",),
             (r"def test_program_on_fresh_data\(",), when={"code": True}),
        Rule("line_service", (r"leave a query service running in the background: on TCP port "
                              r"(?P<port>\d+)",),
             (r"def test_service\(", r'"line_port": {port}\b'), when={"service": True}),
        Rule("http_service", (r"must also speak HTTP on port (?P<port>\d+)",),
             (r'if CFG\["http_port"\]:', r'"http_port": {port}\b'), when={"http": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "build grouped aggregate queries with HAVING filters": "low_query",
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        warehouses = ["ams", "ber", "cdg", "dub", "lis", "mad", "waw", "prg"]
        files, queries = _stock_ns["make_stock"](rng, level, 6 + 6 * level, warehouses)
        http = ctx.verifier_kind == "multi_protocol"
        service = ctx.needs_service or http
        code = ctx.needs_code
        line_port = rng.randint(7100, 7899)
        http_port = rng.randint(8100, 8899) if http else 0
        listing = [
            "`/app/data/stock.csv` (`sku,warehouse,qty`; a sku/warehouse pair may appear "
            "more than once, quantities add up)"
        ]
        if level >= 2:
            listing.append(
                "`/app/data/prices.csv` (`sku,price_cents`; a sku without a price counts as 0)"
            )
        if level >= 3:
            listing.append(
                "`/app/data/moves.csv` (`sku,warehouse,delta`: stock movements that "
                "must be applied on top of stock.csv; they can introduce new pairs)"
            )
        kinds = ["`STOCK <sku>`: total quantity of the sku over all warehouses"]
        if level >= 2:
            kinds.append("`VALUE <warehouse>`: sum of quantity × price_cents in that warehouse")
        if level >= 3:
            kinds.append(
                "`WAREHOUSE <warehouse>`: `<n> <units>` where n is the number of skus "
                "with a positive quantity there and units their total quantity"
            )
        if level >= 4:
            kinds.append(
                "`LOW <n>`: the skus whose total quantity is below n, sorted, joined "
                "with commas, or `NONE`"
            )
        text = (
            "Our warehouse data is in:\n\n" + bullets(listing) + "\n\nQueries are single lines:"
            "\n\n" + bullets(kinds) + "\n\nAn unknown sku or warehouse is answered `UNKNOWN`, "
            "any other malformed query `ERROR`. Answer every query in `/app/queries.txt` and "
            "write one answer per line, in order, to `/app/answers.txt`."
        )
        program = program_path(ctx.language, "/app/lookup")
        if code:
            text += "\n\n" + code_note(
                ctx,
                program,
                "it takes the data folder as its only argument, reads queries from stdin (one "
                "per line) and prints one answer line per query.",
            )
        if service:
            text += (
                f"\n\nThen leave a query service running in the background: on TCP port "
                f"{line_port} (127.0.0.1) a client sends query lines and gets one answer line "
                "back per query, several queries per connection."
            )
            if http:
                text += (
                    f" The same service must also speak HTTP on port {http_port}: `GET "
                    "/<command>/<argument>` with the command in lower case (e.g. `/stock/"
                    'A001`) answers 200 with a JSON object `{"query": "STOCK A001", '
                    '"answer": "..."}` where answer is exactly the line the TCP port gives.'
                )
            if code:
                text += f" The service can get its answers from `{program}`."
            text += " It must read the data from `/app/data` and keep running after you finish."
        # --- solution
        lang = ctx.language if code else ("python" if service else "bash")
        source = program if code else program_path(lang, "/tmp/lookup")
        body = _LOOKUP_PY if lang == "python" else _LOOKUP_SH
        lines = ["head -n 4 /app/data/*.csv", "cat /app/queries.txt"][: 1 + (level > 1)]
        lines += program_setup(lang, source, body)
        run = invoke(lang, source)
        lines.append(f"{run} /app/data < /app/queries.txt > /app/answers.txt")
        if level >= 3:
            lines += ["paste -d'|' /app/queries.txt /app/answers.txt", "wc -l /app/answers.txt"]
        if service:
            cmd = ["python3" if lang == "python" else "bash", source, "/app/data"]
            server = (
                PROGRAM_SERVER_PY.replace("__PROGRAM__", repr(cmd))
                .replace("__LINE_PORT__", str(line_port))
                .replace("__HTTP_PORT__", str(http_port))
                .replace("__PREFIX__", '""')
            )
            lines += [
                "cat > /app/server.py <<'SERVER_EOF'",
                server.rstrip("\n"),
                "SERVER_EOF",
                "nohup python3 /app/server.py > /app/server.log 2>&1 &",
                wait_port(line_port),
            ]
            if http:
                lines.append(wait_port(http_port))
            lines.append(f"head -n 1 /app/queries.txt > /dev/tcp/127.0.0.1/{line_port}")
        if level >= 4:
            lines += [
                "grep -c UNKNOWN /app/answers.txt || true",
                "tail -n 3 /app/answers.txt",
                "wc -l /app/data/*.csv",
                "awk -F, 'NR > 1 { s += $3 } END { print s }' /app/data/stock.csv",
                "grep -c ERROR /app/answers.txt || true",
                "cut -d' ' -f1 /app/queries.txt | sort | uniq -c",
            ]
        params = {
            "level": level,
            "code": code,
            "service": service,
            "http": http,
            "language": ctx.language,
            "program": program,
            "line_port": line_port,
            "http_port": http_port,
        }
        tests = {
            "test_task.py": minimal_test_file(params, _STOCK_GEN + _LOOKUP_TESTS, service=True)
        }
        tests.update(files)
        tests["queries.txt"] = "\n".join(queries) + "\n"
        app = {f"data/{name}": text_ for name, text_ in files.items()}
        app["queries.txt"] = "\n".join(queries) + "\n"
        return Draft(
            instruction=text,
            solution="\n".join(lines),
            tests=tests,
            files=app,
            keep_agent_processes=service,
        )
