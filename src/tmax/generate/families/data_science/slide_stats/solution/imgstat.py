import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * 3
    prev, rows = bytearray(stride), []
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - 3] if i >= 3 else 0
            up, corner = prev[i], prev[i - 3] if i >= 3 else 0
            if f == 1:
                line[i] = (line[i] + left) & 255
            elif f == 2:
                line[i] = (line[i] + up) & 255
            elif f == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif f == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 255
        rows.append(line)
        prev = line
    return width, height, [[tuple(r[x * 3:x * 3 + 3]) for x in range(width)] for r in rows]


def main():
    path, mode, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    w, h, px = decode(path)
    bright = [[sum(px[y][x]) >= limit for x in range(w)] for y in range(h)]
    if mode == "stats":
        count = sum(map(sum, bright))
        print(f"width {w}")
        print(f"height {h}")
        print(f"bright {count}")
        sums = [sum(px[y][x][c] for y in range(h) for x in range(w)) for c in range(3)]
        print("mean_rgb " + " ".join(str(s // (w * h)) for s in sums))
        pts = [(x, y) for y in range(h) for x in range(w) if bright[y][x]]
        if pts:
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            print(f"bbox {min(xs)} {min(ys)} {max(xs)} {max(ys)}")
        else:
            print("bbox none")
        return
    print("blob,area,x,y")
    seen, blob = set(), 0
    for y in range(h):
        for x in range(w):
            if bright[y][x] and (x, y) not in seen:
                blob += 1
                stack, area = [(x, y)], 0
                seen.add((x, y))
                while stack:
                    cx, cy = stack.pop()
                    area += 1
                    for nx, ny in ((cx + 1, cy), (cx - 1, cy), (cx, cy + 1), (cx, cy - 1)):
                        if 0 <= nx < w and 0 <= ny < h and bright[ny][nx] and (nx, ny) not in seen:
                            seen.add((nx, ny))
                            stack.append((nx, ny))
                print(f"{blob},{area},{x},{y}")


main()
