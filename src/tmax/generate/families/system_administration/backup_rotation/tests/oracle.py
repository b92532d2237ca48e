import re


def to_delete(names, keep, level):
    """Backups to delete from a directory listing, sorted by name."""
    backups = sorted((n for n in names if re.fullmatch(r"db-[0-9]{8}\.tar\.gz", n)),
                     reverse=True)
    kept = set(backups[:keep])
    if level >= 2:
        months = set()
        for name in backups:
            if name[3:9] not in months:
                months.add(name[3:9])
                kept.add(name)
    return sorted(n for n in backups if n not in kept)
