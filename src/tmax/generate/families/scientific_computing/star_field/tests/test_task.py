{{ prelude }}
import struct
import zlib
{{ png_reader }}
{{ oracle }}

def write_png(path, width, height, pixels):
    raw = b"".join(b"\x00" + bytes(v for p in pixels[y * width:(y + 1) * width] for v in p)
                   for y in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    with open(path, "wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n"
                  + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                  + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def random_sky(rng):
    width, height = rng.randint(8, 40), rng.randint(6, 30)
    pixels = [(rng.randint(0, 90),) * 3 for _ in range(width * height)]
    for _ in range(rng.randint(0, 12)):
        x, y = rng.randrange(width), rng.randrange(height)
        for dx, dy in rng.choice([[(0, 0)], [(0, 0), (1, 0)], [(0, 0), (1, 0), (0, 1), (1, 1)],
                                   [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)]]):
            if 0 <= x + dx < width and 0 <= y + dy < height:
                v = rng.randint(90, 255)
                pixels[(y + dy) * width + x + dx] = (v, rng.randint(80, 255), v)
    return width, height, pixels


def report_of(path):
    return star_report(*read_png(path), CFG["threshold"], CFG["min_size"])


def test_reports():
    for img, out in CFG["pairs"]:
        want = report_of(img)
        got = read(out)
        assert got == want, f"{out}:\nexpected\n{want}\ngot\n{got}"
    if CFG["level"] >= 2:
        want = "".join(f"{os.path.basename(img)} {report_of(img).split()[1]}\n"
                       for img, _ in CFG["pairs"])
        got = read("/app/out/counts.txt")
        assert got == want, f"counts.txt:\nexpected\n{want}\ngot\n{got}"
    if CFG["level"] >= 3:
        counts = [(-int(report_of(img).split()[1]), os.path.basename(img))
                  for img, _ in CFG["pairs"]]
        want = min(counts)[1]
        assert read("/app/out/richest.txt").strip() == want, f"richest.txt should be {want}"
    if CFG["level"] >= 4:
        total = sum(int(report_of(img).split()[1]) for img, _ in CFG["pairs"])
        summary = json.loads(read("/app/out/summary.json"))
        want = {"images": len(CFG["pairs"]), "stars": total}
        assert summary == want, f"summary.json should be {want}, got {summary}"
        check_manifest("/app/out/checksums.sha256", [out for _, out in CFG["pairs"]]
                       + ["/app/out/counts.txt"])


def test_program_fresh():
    if not CFG["code"]:
        return
    rng = random.Random(1977)
    folder = workdir()
    for i in range(CFG["fresh"]):
        width, height, pixels = random_sky(rng)
        path = os.path.join(folder, f"sky{i}.png")
        write_png(path, width, height, pixels)
        want = star_report(width, height, pixels, CFG["threshold"], CFG["min_size"])
        got = run_program([path]).stdout
        assert got == want, f"fresh {width}x{height} image:\nexpected\n{want}\ngot\n{got}"
