import csv
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
