{{ oracle }}
import struct
import sys
import zlib

THRESHOLD, MIN_SIZE = {{ threshold }}, {{ min_size }}


def load(path):
    data = open(path, "rb").read()
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * 3 + 1
    pixels = []
    for y in range(height):
        row = raw[y * stride + 1:(y + 1) * stride]
        pixels += [tuple(row[x * 3:x * 3 + 3]) for x in range(width)]
    return width, height, pixels


if __name__ == "__main__":
    sys.stdout.write(star_report(*load(sys.argv[1]), THRESHOLD, MIN_SIZE))
