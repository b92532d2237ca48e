def make_slide(rng, width, height, blobs):
    seed = rng.randrange(1000)
    pixels = [((x * 37 + y * 91 + (x * y) % 13 + seed) % 57,
               (x * 11 + y * 53 + seed) % 49,
               (x * 29 + y * 17 + (x + y) % 7 + seed) % 61)
              for y in range(height) for x in range(width)]
    for _ in range(blobs):
        r = rng.randint(1, 4)
        cx, cy = rng.randint(r, width - r - 1), rng.randint(r, height - r - 1)
        color = (rng.randint(150, 255), rng.randint(150, 255), rng.randint(150, 255))
        for y in range(cy - r, cy + r + 1):
            for x in range(cx - r, cx + r + 1):
                if (x - cx) ** 2 + (y - cy) ** 2 <= r * r + 1:
                    pixels[y * width + x] = color
    return pixels
