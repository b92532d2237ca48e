import math


def rk4_final(r, k, y0, h, steps):
    """Classic RK4 for dy/dt = r*y*(1 - y/k); returns the trajectory (step values)."""
    ys = [y0]
    y = y0
    for _ in range(steps):
        f1 = r * y * (1 - y / k)
        y2 = y + h / 2 * f1
        f2 = r * y2 * (1 - y2 / k)
        y3 = y + h / 2 * f2
        f3 = r * y3 * (1 - y3 / k)
        y4 = y + h * f3
        f4 = r * y4 * (1 - y4 / k)
        y = y + h / 6 * (f1 + 2 * f2 + 2 * f3 + f4)
        ys.append(y)
    return ys


def exact_logistic(r, k, y0, t):
    return k / (1 + (k - y0) / y0 * math.exp(-r * t))


def solve_cases(text, mode):
    out = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        name, r, k, y0, h, steps = parts[0], *map(float, parts[1:5]), int(parts[5])
        if mode == "metric":
            out.append("%s %.10g" % (name, exact_logistic(r, k, y0, h * steps)))
        else:
            out.append("%s %.6f" % (name, rk4_final(r, k, y0, h, steps)[-1]))
    return "\n".join(out)
