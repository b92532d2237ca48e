def cents(text):
    whole, _, frac = text.partition(".")
    return int(whole) * 100 + int((frac + "00")[:2])


def customer_totals(texts, level):
    """Per-customer totals in cents (and counts) over settled rows, refunds subtracted."""
    seen, totals, counts = set(), {}, {}
    for text in texts:
        for line in text.splitlines()[1:]:
            if not line.strip():
                continue
            txn, _day, customer, amount, status = line.split(",")
            if level >= 2:
                if txn in seen:
                    continue
                seen.add(txn)
            if status == "settled":
                value = cents(amount)
            elif status == "refund" and level >= 3:
                value = -cents(amount)
            else:
                continue
            totals[customer] = totals.get(customer, 0) + value
            counts[customer] = counts.get(customer, 0) + 1
    return totals, counts


def money(c):
    sign = "-" if c < 0 else ""
    return "%s%d.%02d" % (sign, abs(c) // 100, abs(c) % 100)


def totals_csv(texts, level):
    totals, counts = customer_totals(texts, level)
    head = "customer,total,count" if level >= 4 else "customer,total"
    rows = [head]
    for customer in sorted(totals):
        row = f"{customer},{money(totals[customer])}"
        if level >= 4:
            row += f",{counts[customer]}"
        rows.append(row)
    return "\n".join(rows) + "\n"
