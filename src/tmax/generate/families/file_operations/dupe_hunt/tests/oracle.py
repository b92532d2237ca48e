def dupe_groups(files):
    """Groups (sorted path lists, ordered by first path) of non-empty files with equal
    content; ``files`` maps relative path -> bytes."""
    by_content = {}
    for path, data in files.items():
        if data:
            by_content.setdefault(data, []).append(path)
    groups = [sorted(paths) for paths in by_content.values() if len(paths) > 1]
    return sorted(groups, key=lambda g: g[0])


def dupe_text(files):
    return "".join(" ".join(g) + "\n" for g in dupe_groups(files))
