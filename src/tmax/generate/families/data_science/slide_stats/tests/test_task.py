{{ prelude }}
{{ slide }}{{ png_reader }}

def write_png(path, width, height, pixels):
    import struct
    import zlib

    raw = b"".join(b"\x00" + bytes(v for p in pixels[y * width:(y + 1) * width] for v in p)
                   for y in range(height))

    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body)))

    head = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    with open(path, "wb") as handle:
        handle.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head)
                     + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


HERE = os.path.dirname(__file__)


def expect(path, mode, limit, level):
    w, h, flat = read_png(path)
    px = [flat[y * w:(y + 1) * w] for y in range(h)]
    bright = {(x, y) for y in range(h) for x in range(w) if sum(px[y][x]) >= limit}
    if mode == "stats":
        out = [f"width {w}", f"height {h}", f"bright {len(bright)}"]
        if level >= 2 or CFG["full"]:
            sums = [sum(p[c] for p in flat) for c in range(3)]
            out.append("mean_rgb " + " ".join(str(s // (w * h)) for s in sums))
            if bright:
                xs, ys = [p[0] for p in bright], [p[1] for p in bright]
                out.append(f"bbox {min(xs)} {min(ys)} {max(xs)} {max(ys)}")
            else:
                out.append("bbox none")
        return "\n".join(out) + "\n"
    out, seen = ["blob,area,x,y"], set()
    for y in range(h):
        for x in range(w):
            if (x, y) in bright and (x, y) not in seen:
                seen.add((x, y))
                todo, area = [(x, y)], 0
                while todo:
                    cx, cy = todo.pop()
                    area += 1
                    for n in ((cx + 1, cy), (cx - 1, cy), (cx, cy + 1), (cx, cy - 1)):
                        if n in bright and n not in seen:
                            seen.add(n)
                            todo.append(n)
                out.append(f"{len(out)},{area},{x},{y}")
    return "\n".join(out) + "\n"


def check(path, want):
    got = read(path)
    assert got == want, f"{path} differs.\nexpected:\n{want}\ngot:\n{got}"


def test_outputs():
    p = CFG
    if p["level"] < 4:
        src = os.path.join(HERE, "slide.png")
        check("/app/out/stats.txt", expect(src, "stats", p["limit"], p["level"]))
        if CFG["level"] >= 3:
            check("/app/out/blobs.csv", expect(src, "blobs", p["limit"], p["level"]))
        return
    rows, busiest = [], None
    for stem in p["stems"]:
        blobs = expect(os.path.join(HERE, stem + ".png"), "blobs", p["limit"], 4)
        check(f"/app/out/{stem}_blobs.csv", blobs)
        areas = [int(line.split(",")[1]) for line in blobs.splitlines()[1:]]
        stats = expect(os.path.join(HERE, stem + ".png"), "stats", p["limit"], 4)
        bright = int(stats.splitlines()[2].split()[1])
        rows.append((stem, bright, len(areas), max(areas, default=0)))
        if busiest is None or len(areas) > busiest[1]:
            busiest = (stem, len(areas))
    want = "image,bright,blobs,largest\n" + "".join("%s,%d,%d,%d\n" % r for r in rows)
    check("/app/out/summary.csv", want)
    check("/app/out/busiest.txt", busiest[0] + "\n")


def test_program_on_fresh_images():
    if not CFG["code"]:
        return
    rng = random.Random(555)
    work = tempfile.mkdtemp()
    for case in range(3):
        w, h = rng.randint(12, 40), rng.randint(12, 40)
        path = os.path.join(work, f"img{case}.png")
        write_png(path, w, h, make_slide(rng, w, h, rng.randint(0, 6)))
        modes = ["stats"] + (["blobs"] if CFG["level"] >= 3 else [])
        for mode in modes:
            done = run_program([path, mode, CFG["limit"]])
            assert done.returncode == 0, f"{mode} failed: {done.stderr[-1500:]}"
            want = expect(path, mode, CFG["limit"], max(CFG["level"], 2))
            assert done.stdout == want, f"{mode} on {w}x{h}:\n{want}\ngot:\n{done.stdout}"
