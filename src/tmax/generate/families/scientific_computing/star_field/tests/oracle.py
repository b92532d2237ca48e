def find_stars(width, height, pixels, threshold, min_size):
    """4-connected blobs of pixels with (R+G+B)//3 >= threshold, in raster order of their
    first pixel: [(x10, y10, size)] with centroids times ten, rounded half up."""
    bright = [sum(p) // 3 >= threshold for p in pixels]
    seen = [False] * len(bright)
    stars = []
    for start in range(len(bright)):
        if not bright[start] or seen[start]:
            continue
        seen[start] = True
        stack, members = [start], []
        while stack:
            i = stack.pop()
            members.append(i)
            x, y = i % width, i // width
            for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                j = ny * width + nx
                if 0 <= nx < width and 0 <= ny < height and bright[j] and not seen[j]:
                    seen[j] = True
                    stack.append(j)
        n = len(members)
        if n < min_size:
            continue
        sx = sum(i % width for i in members)
        sy = sum(i // width for i in members)
        stars.append(((20 * sx + n) // (2 * n), (20 * sy + n) // (2 * n), n))
    return stars


def star_report(width, height, pixels, threshold, min_size):
    stars = find_stars(width, height, pixels, threshold, min_size)
    lines = [f"count {len(stars)}"]
    lines += [f"{x // 10}.{x % 10} {y // 10}.{y % 10} {n}" for x, y, n in stars]
    return "\n".join(lines) + "\n"
