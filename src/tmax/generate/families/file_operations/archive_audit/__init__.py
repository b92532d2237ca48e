"""Audit delivered archives against a sha256 manifest (the task's files are the templates
beside this module; the reference auditor in Python or Bash is ``solution/audit.*``, the
oracle the tests and the Python auditor share is ``tests/oracle.py``)."""

from __future__ import annotations

import gzip
import hashlib
import io
import lzma
import tarfile
import zipfile
from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import LANGUAGE_NAMES, manifest_test_file, program_path
from tmax.generate.families.file_operations._shared import run_command, words
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates


def _tar_bytes(members: dict[str, bytes], compress: str) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1700000000, 0o644
            info.uname = info.gname = "archive"
            tf.addfile(info, io.BytesIO(data))
    if compress == "xz":
        small = [{"id": lzma.FILTER_LZMA2, "dict_size": 1 << 16, "preset": 1}]
        return lzma.compress(raw.getvalue(), format=lzma.FORMAT_XZ, filters=small)
    return gzip.compress(raw.getvalue(), mtime=0)


def _zip_bytes(members: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 6))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return raw.getvalue()


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


_INCOMING = ["incoming", "delivery", "inbound", "received", "dropbox"]
_MANIFESTS = ["MANIFEST.sha256", "manifest.sha256", "SHA256SUMS.txt", "checksums.txt"]
_STEMS = ["delivery", "batch", "drop", "shipment", "transfer"]
_PROGRAMS = ["audit", "check_delivery", "verify_archives"]
_EXTENSIONS = {"python": "py", "bash": "sh"}
"""The reference auditor of each language: ``solution/audit.<extension>``."""
_OPENERS = [
    "This delivery arrived in {incoming}: {listed}, together with {manifest} (sha256sum "
    "format, member paths).",
    "Before I accept what landed in {incoming} ({listed}), I need it checked against "
    "{manifest}, a sha256sum list of member paths.",
    "I am not sure every file inside {listed} in {incoming} came through intact; {manifest} "
    "gives the sha256 of each member path that should be there (sha256sum format).",
    "The latest transfer left {listed} in {incoming}, with the checksum manifest {manifest} "
    "(sha256sum lines naming member paths).",
    "Every delivery to {incoming} comes with a manifest of member paths in sha256sum "
    "format; this one is {listed} with {manifest}.",
]


@register
class ArchiveAudit(Family):
    """Audit delivered archives (tar.gz, zip, tar.xz by level) against a sha256 manifest,
    repack the verified members under a compression-ratio threshold, quarantine the bad
    ones; code asks for a reusable auditor checked on random archives."""

    name = "file_operations.archive_audit"
    domain = "file_operations"
    verifier_kinds = frozenset({"exact_text", "metric_threshold"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("deliveries_untouched", (r"Don't modify the deliveries",),
             (r"def test_deliveries_untouched\(",)),
        Rule("audit_manifest", (r"`/app/\w+/\w+\.txt`: one line `STATUS NAME`",),
             (r"def test_audit_report\(",)),
        Rule("repack_verified", (r"`/app/\w+/\w+\.tar\.gz`: a gzip-compressed tar",),
             (r"def test_repack\(",), when={"repack": True}),
        Rule("ratio_limit", (r"it must be at most \d+% of the members' total size",),
             (r'ratio <= CFG\["ratio"\]',), when={"limited": True}),
        Rule("quarantine", (r"`/app/\w+/\w+/NAME`: every CORRUPT or EXTRA member",),
             (r'os\.path\.join\(CFG\["quarantine"\], name\)',), levels=frozenset({4})),
        Rule("summary", (r'`/app/\w+/\w+\.json`: `\{"ok": A, "corrupt": B',),
             (r'read\(CFG\["summary"\]\)',), levels=frozenset({4})),
        Rule("checksums",
             (r"`/app/\w+/(?:checksums\.sha256|SHA256SUMS|outputs\.sha256)`: sha256sum",),
             (r'check_manifest\(CFG\["checksums"\]',), levels=frozenset({4})),
        Rule("program",
             (r"reusable .+? program at `/app/(?:audit|check_delivery|verify_archives)\.",),
             (r"def test_program_fresh\(",), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "verify archive contents against a checksum manifest": "audit_manifest"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        kinds = ["tar.gz", "zip", "tar.xz"][: {1: 1, 2: 2, 3: 2, 4: 3}[level]]
        folders = rng.sample(["logs", "exports", "scans", "ledger", "mail"], 3)
        blobs: dict[str, bytes] = {}
        for i in range(4 + 3 * level):
            name = f"{folders[i % 3]}/{rng.choice(['day', 'part', 'batch'])}_{i:02d}.txt"
            line = f"{words(rng, 5)} {rng.randint(0, 99)}\n"
            blobs[name] = (line * rng.randint(40, 90) + words(rng, 3) + "\n").encode()
        names = sorted(blobs)
        manifest = []
        bad = set(rng.sample(names, 1 + level // 2))
        missing = set(rng.sample([n for n in names if n not in bad], 1 + (level >= 3)))
        extra = {rng.choice([n for n in names if n not in bad | missing])}
        for n in names:
            if n in extra:
                continue
            digest = hashlib.sha256(blobs[n] + (b"x" if n in bad else b"")).hexdigest()
            manifest.append(f"{digest}  {n}")
        manifest_text = "\n".join(manifest) + "\n"
        shipped = [n for n in names if n not in missing]
        incoming = "/app/" + rng.choice(_INCOMING)
        manifest_name = rng.choice(_MANIFESTS)
        rel = incoming.removeprefix("/app/")
        app_files: dict[str, str | bytes] = {f"{rel}/{manifest_name}": manifest_text}
        tests: dict[str, str | bytes] = {f"pristine/{manifest_name}": manifest_text}
        archives = []
        stem = f"{rng.choice(_STEMS)}_w{rng.randint(1, 52):02d}"
        for k, kind in enumerate(kinds):
            part = {n: blobs[n] for j, n in enumerate(shipped) if j % len(kinds) == k}
            data = _zip_bytes(part) if kind == "zip" else _tar_bytes(part, kind[-2:])
            fname = f"{stem}_{k + 1}.{kind}" if len(kinds) > 1 else f"{stem}.{kind}"
            app_files[f"{rel}/{fname}"] = data
            tests[f"pristine/{fname}"] = data
            archives.append(f"{incoming}/{fname}")
        code = ctx.needs_code
        lang = ctx.language if code else "bash"
        prog = program_path(lang, "/app/" + rng.choice(_PROGRAMS))
        limited = ctx.verifier_kind == "metric_threshold"
        ratio = rng.choice([0.2, 0.25, 0.3, 0.35]) if limited else 0
        repack = level >= 3 or limited
        out = "/app/" + rng.choice(["out", "output", "results", "checked"])
        report = f"{out}/{rng.choice(['audit.txt', 'status.txt', 'verification.txt'])}"
        verified = f"{out}/{rng.choice(['verified', 'accepted', 'good_members'])}.tar.gz"
        quarantine = f"{out}/{rng.choice(['quarantine', 'rejected', 'suspect'])}"
        summary = f"{out}/{rng.choice(['summary.json', 'counts.json', 'tally.json'])}"
        checksums = f"{out}/{rng.choice(['checksums.sha256', 'SHA256SUMS', 'outputs.sha256'])}"
        cfg = {
            "level": level,
            "incoming": incoming,
            "manifest": manifest_name,
            "archives": archives,
            "report": report,
            "verified": verified,
            "quarantine": quarantine,
            "summary": summary,
            "checksums": checksums,
            "lang": lang,
            "program": prog,
            "code": code,
            "repack": repack,
            "limited": limited,
            "ratio": ratio,
            "fresh": 6 if ctx.verifier_kind == "exact_text" else 10,
        }
        tool = prog if code else "/tmp/audit.sh"
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        values = {
            "level": level,
            "opener": rng.choice(_OPENERS).format(
                incoming=incoming,
                listed=", ".join(_base(a) for a in archives),
                manifest=f"{incoming}/{manifest_name}",
            ),
            "incoming": incoming,
            "manifest_name": manifest_name,
            "archives": archives,
            "out": out,
            "report": report,
            "report_name": _base(report),
            "verified": verified,
            "verified_name": _base(verified),
            "quarantine": quarantine,
            "summary": summary,
            "summary_name": _base(summary),
            "checksums": checksums,
            "repack": repack,
            "ratio": ratio,
            "ratio_percent": f"{ratio:.0%}",
            "code": code,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "tool": tool,
            "run": run_command(lang, tool),
            "source": files.render(f"solution/audit.{_EXTENSIONS[lang]}", oracle=oracle).strip(),
        }
        prelude = manifest_test_file(cfg, "")
        tests["test_task.py"] = files.render("tests/test_task.py", oracle=oracle, prelude=prelude)
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests=tests,
            files=app_files,
        )
