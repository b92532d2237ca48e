def make_shop(rng, n_customers, n_products, n_orders, regions, categories, first, last):
    customers = []
    for cid in range(1, n_customers + 1):
        name = rng.choice(first) + " " + rng.choice(last)
        customers.append([cid, name, rng.choice(regions), 1 if rng.random() < 0.12 else 0])
    products = []
    for pid in range(1, n_products + 1):
        k = len(categories)
        cat = categories[pid - 1] if pid <= k else rng.choice(categories)
        products.append([pid, "item" + str(pid), cat, rng.randint(2, 90) * 25])
    orders, items = [], []
    statuses = ["completed", "completed", "completed", "cancelled", "pending"]
    for oid in range(1, n_orders + 1):
        date = "2024-%02d-%02d" % (rng.randint(1, 6), rng.randint(1, 28))
        orders.append([oid, rng.randint(1, n_customers), date, rng.choice(statuses)])
        for pid in rng.sample(range(1, n_products + 1), rng.randint(1, 3)):
            items.append([oid, pid, rng.randint(1, 4)])
    return {"customers": customers, "products": products, "orders": orders, "items": items}


SCHEMA = (
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, region TEXT NOT NULL,"
    " is_test INTEGER NOT NULL DEFAULT 0);\n"
    "CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,"
    " price_cents INTEGER NOT NULL);\n"
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL"
    " REFERENCES customers(id), order_date TEXT NOT NULL, status TEXT NOT NULL);\n"
    "CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id),"
    " product_id INTEGER NOT NULL REFERENCES products(id), qty INTEGER NOT NULL);\n"
)


def shop_sql(data):
    def value(v):
        return str(v) if isinstance(v, int) else "'" + str(v).replace("'", "''") + "'"

    out = [SCHEMA]
    for table, key in (("customers", "customers"), ("products", "products"),
                       ("orders", "orders"), ("order_items", "items")):
        rows = ",".join("(" + ",".join(value(v) for v in row) + ")" for row in data[key])
        out.append(f"INSERT INTO {table} VALUES {rows};\n")
    return "".join(out)
