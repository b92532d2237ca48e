import hashlib
import io
import tarfile
import zipfile


def members(path):
    """{member name: bytes} of the regular files in a tar (any compression) or zip."""
    out = {}
    if path.endswith(".zip"):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.is_dir():
                    out[info.filename] = zf.read(info)
    else:
        with tarfile.open(path, "r:*") as tf:
            for info in tf.getmembers():
                if info.isfile():
                    out[info.name] = tf.extractfile(info).read()
    return out


def audit(manifest_text, archive_paths):
    """{name: status} with OK / CORRUPT / MISSING / EXTRA."""
    want = {}
    for line in manifest_text.splitlines():
        if line.strip():
            digest, name = line.split(None, 1)
            want[name.strip().lstrip("*")] = digest
    have = {}
    for path in archive_paths:
        have.update(members(path))
    status = {}
    for name, digest in want.items():
        if name not in have:
            status[name] = "MISSING"
        else:
            ok = hashlib.sha256(have[name]).hexdigest() == digest
            status[name] = "OK" if ok else "CORRUPT"
    for name in have:
        status.setdefault(name, "EXTRA")
    return status, have


def audit_text(status):
    return "".join(f"{status[n]} {n}\n" for n in sorted(status))
