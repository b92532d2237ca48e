"""The trusted toolbox: a relocatable tree of host binaries mounted read-only at /opt/tmax.

Every sandbox (podman, bubblewrap, apptainer) mounts this directory read-only at
:data:`TOOLBOX_MOUNT`. The control shell and the task verifier run only binaries
from it, so an agent that replaces ``/bin/bash``, ``/usr/bin/python3``, pytest, or
the image's libc and ``ld.so`` with stubs cannot change how the verifier runs.

That guarantee only holds if nothing in the toolbox loads code from the image, so:

* every executable's ELF interpreter is ``/opt/tmax/lib/<loader>``, a copy of the
  host's dynamic loader (a stub ``/lib64/ld-linux-x86-64.so.2`` in the image is
  never used);
* every ELF file (executables, shared libraries, Python extension modules) carries
  ``DT_RPATH=/opt/tmax/lib``. ``DT_RPATH`` rather than ``DT_RUNPATH`` because the
  loader also applies an executable's RPATH to libraries that it loads later
  (``dlopen`` of ``lib-dynload/*.so``), and RUNPATH is not transitive;
* every ELF file is marked ``DF_1_NODEFLIB`` (``patchelf --no-default-lib``), so a
  library missing from the toolbox is never looked for in the image's ``/lib`` or
  ``/usr/lib``, neither while loading nor through a later ``dlopen`` (NSS, libgcc_s);
* the copied loader's built-in paths ``/etc/ld.so.preload`` and ``/etc/ld.so.cache``
  and libc's ``/etc/nsswitch.conf`` and gconv directory are redirected (same-length
  byte patches) to paths below ``/opt/tmax`` that never exist, because the image's
  versions of those files would otherwise let an agent inject a library into every
  toolbox process;
* Python's standard library and pytest are copied next to the interpreter
  (``lib/python3.X`` and ``lib/python3/dist-packages``), where the relocated
  interpreter finds them through its own landmark search, without ``PYTHONPATH``;
  symlinks that point out of the standard library (Debian's ``sitecustomize.py`` →
  ``/etc/python3.X/sitecustomize.py``) are dropped, since they would resolve inside
  the image; the toolbox's ``sitecustomize.py`` is :mod:`tmax.sandbox.verifier_guard`.

Not covered, because the path is compiled in and shorter than any path below
``/opt/tmax``: ``/bin/sh`` as started by libc's ``system()``/``popen()``, by Python's
``subprocess`` with ``shell=True`` and by GNU tar's ``-z``/``-j`` (its compressor is
run via ``/bin/sh -c``). Those run the image's shell; the control shell and verifier
must pipe through ``gzip`` instead of ``tar -z``. Python also reads per-user site
directories from ``$HOME`` unless started with ``-s``/``-I`` or ``PYTHONNOUSERSITE=1``.

The build is keyed by a hash of every host file it copies (:func:`toolbox_key`), so a
host upgrade produces a new toolbox directory instead of silently mutating an old one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tmax.io import cache_dir as default_cache_dir
from tmax.io import file_lock
from tmax.sandbox import seccomp

__all__ = [
    "TOOLBOX_MOUNT",
    "ToolboxError",
    "build_toolbox",
    "ensure_toolbox",
    "toolbox_key",
    "toolbox_sources",
]

TOOLBOX_MOUNT = "/opt/tmax"
"""Where every sandbox backend mounts the toolbox, read-only."""

FORMAT_VERSION = 1
"""Bumped whenever the layout or the patching changes, so old cached toolboxes are not reused."""

DEFAULT_PYTHON = "/usr/bin/python3"
"""Debian's system interpreter; not the pyenv/venv ``python3`` that may come first on PATH."""

_LIB_DIR = f"{TOOLBOX_MOUNT}/lib"
_VOID = "void"
"""Top-level name that never exists in the toolbox; redirected host paths point at it."""
_TOP_LEVEL = frozenset({"bin", "lib", "MANIFEST.json"})
"""The only entries at the toolbox root (so redirected paths cannot exist)."""

_SYSTEM_BIN_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")
# Looked up in the system directories only: the host's PATH may start with pyenv
# shims or a virtualenv, whose "binaries" are scripts.

REQUIRED_TOOLS: tuple[str, ...] = (
    "bash",
    # coreutils used by the control shell and by task test scripts
    "cat", "head", "tail", "timeout", "rm", "mkdir", "chmod", "chown", "cp", "mv", "ls",
    "stat", "env", "sleep", "wc", "tr", "cut", "sort", "uniq", "date", "dirname",
    "basename", "printf", "echo", "test", "[", "true", "false", "tee", "mktemp",
    "realpath", "id", "sha256sum", "md5sum", "base64", "seq",
    # the rest of a minimal shell environment
    "tar", "gzip", "grep", "sed", "awk", "find", "xargs", "diff", "cmp",
    # the terminal that keystroke harnesses (terminus-2, openhands) drive
    "tmux",
    # namespaces and capabilities: the agent's session and the verifier each run in
    # their own PID and mount namespaces, out of reach of the control shell
    "unshare", "setpriv", "mount",
)  # fmt: skip
"""Binaries that must be in ``bin/``; a missing one is an error."""

OPTIONAL_TOOLS: tuple[str, ...] = (
    "touch", "ln", "readlink", "pwd", "uname", "nproc", "du", "od", "rmdir", "paste",
    "comm", "expr", "tac", "nl", "fold", "split", "sha1sum", "sha512sum", "yes",
    "whoami", "sync", "join", "truncate", "install", "shuf", "numfmt", "nice", "nohup",
)  # fmt: skip
"""Further coreutils that test scripts commonly use; copied when the host has them."""

_LINKS = {"sh": "bash"}
"""Toolbox names that must point at another toolbox binary (the host's sh is dash)."""

_DEBIAN_PACKAGE = {
    "bash": "bash",
    "tar": "tar",
    "gzip": "gzip",
    "grep": "grep",
    "sed": "sed",
    "awk": "mawk",
    "find": "findutils",
    "xargs": "findutils",
    "diff": "diffutils",
    "cmp": "diffutils",
    "tmux": "tmux",
    "unshare": "util-linux",
    "setpriv": "util-linux",
    "mount": "mount",
}
"""Debian package for each required tool that is not in coreutils (for install/errors)."""

# (distribution, top-level import names, required). The optional ones are what
# Debian's pytest 7 needs (attrs, py); newer pytests need exceptiongroup/tomli only
# on older Pythons. Every present one is copied with its *.dist-info / *.egg-info so
# importlib.metadata (pytest's plugin discovery) sees the same distributions.
_PYTEST_DISTS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("pytest", ("pytest", "_pytest", "py.py"), True),
    ("pluggy", ("pluggy",), True),
    ("iniconfig", ("iniconfig",), True),
    ("packaging", ("packaging",), True),
    ("py", ("py",), False),
    ("attrs", ("attr", "attrs"), False),
    ("exceptiongroup", ("exceptiongroup",), False),
    ("tomli", ("tomli",), False),
)

_STDLIB_SKIP = frozenset(
    {
        "lib-dynload",  # copied separately (its ELF files are patched)
        "site-packages",
        "dist-packages",
        "test",
        "idlelib",
        "tkinter",
        "turtledemo",
        "ensurepip",
    }
)
"""Top-level standard-library entries not copied: unused by a verifier, or copied apart.
``config-3.X-*`` (25 MB of static libpython for building extensions) is skipped by prefix."""

_ELF_MAGIC = b"\x7fELF"
_LDD_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
"""ldd runs without the caller's LD_LIBRARY_PATH/LD_PRELOAD, to see the system's libraries."""


class ToolboxError(RuntimeError):
    """The toolbox cannot be built on this host (missing binaries, ldd/patchelf failures)."""


# --- what to copy -------------------------------------------------------------------


@dataclass(frozen=True)
class _PythonInfo:
    """Where the source interpreter keeps its pieces (asked from the interpreter itself)."""

    executable: Path  # resolved host binary, e.g. /usr/bin/python3.11
    version: str  # "3.11.2"
    xy: str  # "3.11"
    prefix: Path
    stdlib: Path
    dynload: Path
    site_dir: Path  # the directory holding pytest
    site_rel: str  # site_dir relative to prefix: where it goes in the toolbox


@dataclass
class _Plan:
    """Everything a build copies: toolbox-relative destination → host source."""

    python: _PythonInfo
    files: dict[str, Path] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)  # relative path → symlink target
    dropped: list[str] = field(default_factory=list)  # symlinks left out, with the reason
    loader: str = ""  # basename of the dynamic loader in lib/
    built_from: dict[Path, Path] = field(default_factory=dict)
    """Files we compile (in the cache, wherever it is) → their source, which keys them."""

    def add(self, rel: str, src: Path) -> None:
        if rel in self.files and self.files[rel] != src:
            raise ToolboxError(f"two sources for {rel}: {self.files[rel]} and {src}")
        self.files[rel] = src

    def sources(self) -> list[Path]:
        """Host files whose bytes define the toolbox (compiled ``.pyc`` files excluded).

        ``.pyc`` files are still copied (the toolbox is read-only, so Python could not
        write them there), but they are derived from the ``.py`` sources and the host
        interpreter may rewrite them at any time, so they must not move the key.
        """
        return sorted(
            {self.built_from.get(src, src) for rel, src in self.files.items()
             if not rel.endswith(".pyc")}
        )  # fmt: skip


def _run(cmd: list[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == _ELF_MAGIC
    except OSError:
        return False


def _find_system_binary(name: str) -> Path | None:
    for directory in _SYSTEM_BIN_DIRS:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _apt_install(packages: Iterable[str], why: str) -> None:
    """Install Debian packages when running as root; otherwise say what to install."""
    names = sorted(set(packages))
    command = f"apt-get install -y --no-install-recommends {' '.join(names)}"
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ToolboxError(f"{why}; install it with: {command}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *names]
    if _run(install, env=env).returncode != 0:
        _run(["apt-get", "update"], env=env)  # a fresh image may have no package lists
        result = _run(install, env=env)
        if result.returncode != 0:
            raise ToolboxError(f"{why}; `{command}` failed:\n{result.stderr[-2000:]}")


def _python_info(python: str | None) -> _PythonInfo:
    """Ask the interpreter for its version and layout; install Debian's if it is missing."""
    exe = python or DEFAULT_PYTHON
    if not Path(exe).exists() and python is None:
        _apt_install(["python3", "python3-pytest"], f"{exe} is missing")
    if not Path(exe).exists():
        raise ToolboxError(f"python interpreter {exe} does not exist")
    probe = (
        "import json, site, sys, sysconfig\n"
        "print(json.dumps({'version': '%d.%d.%d' % sys.version_info[:3],\n"
        " 'prefix': sys.prefix, 'stdlib': sysconfig.get_path('stdlib'),\n"
        " 'dynload': [p for p in sys.path if p.endswith('lib-dynload')],\n"
        " 'site': site.getsitepackages()}))\n"
    )
    result = _run([exe, "-I", "-c", probe])
    if result.returncode != 0:
        raise ToolboxError(f"{exe} does not run: {result.stderr.strip()}")
    data: dict[str, Any] = json.loads(result.stdout)
    prefix = Path(data["prefix"])
    site_dirs = [Path(p) for p in data["site"]]
    # Debian's own pytest (python3-pytest) first, over a pip-installed one in /usr/local.
    debian_site = prefix / "lib" / "python3" / "dist-packages"
    ordered = [debian_site, *(p for p in site_dirs if p != debian_site)]
    site_dir = next((p for p in ordered if (p / "pytest" / "__init__.py").is_file()), None)
    if site_dir is None and python is None:
        _apt_install(["python3-pytest"], f"Debian's pytest is missing from {debian_site}")
        site_dir = debian_site if (debian_site / "pytest" / "__init__.py").is_file() else None
    if site_dir is None:
        raise ToolboxError(
            f"{exe} has no pytest in {[str(p) for p in ordered]}; "
            "install it with: apt-get install -y --no-install-recommends python3-pytest"
        )
    dynload = [Path(p) for p in data["dynload"]]
    if not dynload:
        raise ToolboxError(f"{exe} has no lib-dynload directory on sys.path")
    try:
        site_rel = site_dir.relative_to(prefix).as_posix()
    except ValueError as exc:
        raise ToolboxError(f"{site_dir} is not below {exe}'s prefix {prefix}") from exc
    version = str(data["version"])
    return _PythonInfo(
        executable=Path(os.path.realpath(exe)),
        version=version,
        xy=".".join(version.split(".")[:2]),
        prefix=prefix,
        stdlib=Path(data["stdlib"]),
        dynload=dynload[0],
        site_dir=site_dir,
        site_rel=site_rel,
    )


def _walk_files(root: Path, skip_top: frozenset[str] = frozenset()) -> Iterator[Path]:
    """Every file or symlink below ``root`` (sorted, so plans are deterministic)."""
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == root:
            dirnames[:] = [d for d in dirnames if d not in skip_top and not d.startswith("config-")]
        dirnames.sort()
        # os.walk lists symlinks to directories as directories without following them.
        for name in sorted(filenames + [d for d in dirnames if (here / d).is_symlink()]):
            yield here / name
        dirnames[:] = [d for d in dirnames if not (here / d).is_symlink()]


def _add_tree(plan: _Plan, src_root: Path, dest_root: str, skip_top: frozenset[str]) -> None:
    """Copy a tree, resolving symlinks that stay inside it and dropping those that leave it.

    A link out of the tree (Debian: ``sitecustomize.py`` → ``/etc/python3.X/``) would
    resolve inside the sandbox image, i.e. to a file the agent controls.
    """
    real_root = Path(os.path.realpath(src_root))
    for path in _walk_files(src_root, skip_top):
        rel = f"{dest_root}/{path.relative_to(src_root).as_posix()}"
        if path.is_symlink():
            target = Path(os.path.realpath(path))
            if not target.is_relative_to(real_root) or not target.is_file():
                plan.dropped.append(f"{rel} -> {os.readlink(path)} (not a file in {src_root})")
                continue
            plan.add(rel, target)
        elif path.is_file():
            plan.add(rel, path)


def _add_python(plan: _Plan) -> None:
    info = plan.python
    exe = info.executable
    plan.add(f"bin/{exe.name}", exe)
    for name in ("python3", f"python{info.xy}"):
        if name != exe.name:
            plan.links[f"bin/{name}"] = exe.name
    stdlib_rel = f"lib/python{info.xy}"
    _add_tree(plan, info.stdlib, stdlib_rel, _STDLIB_SKIP)
    # Ours, not the host's: locks the reward directory away from every Python process
    # a verification starts (tmax.sandbox.verifier_guard).
    plan.add(f"{stdlib_rel}/sitecustomize.py", Path(__file__).with_name("verifier_guard.py"))
    _add_tree(plan, info.dynload, f"{stdlib_rel}/lib-dynload", frozenset())
    for dist, modules, required in _PYTEST_DISTS:
        found = False
        for module in modules:
            src = info.site_dir / module
            if src.is_dir():
                _add_tree(plan, src, f"{info.site_rel}/{module}", frozenset())
                found = True
            elif src.is_file():
                plan.add(f"{info.site_rel}/{module}", src)
                found = True
        if required and not found:
            raise ToolboxError(
                f"{dist} is missing from {info.site_dir}; install it with: "
                "apt-get install -y --no-install-recommends python3-pytest"
            )
        pattern = re.compile(rf"{re.escape(dist)}-[^-/]+\.(dist-info|egg-info)$", re.IGNORECASE)
        for meta in sorted(info.site_dir.iterdir()):
            if pattern.match(meta.name):
                if meta.is_dir():
                    _add_tree(plan, meta, f"{info.site_rel}/{meta.name}", frozenset())
                else:
                    plan.add(f"{info.site_rel}/{meta.name}", meta)


def _add_tools(plan: _Plan, install: bool = True) -> None:
    missing: list[str] = []
    for name in (*REQUIRED_TOOLS, *OPTIONAL_TOOLS):
        found = _find_system_binary(name)
        if found is None:
            if name in REQUIRED_TOOLS:
                missing.append(name)
            continue
        real = Path(os.path.realpath(found))
        if not _is_elf(real):
            # A script would run under whatever interpreter its #! names in the image.
            if name in REQUIRED_TOOLS:
                raise ToolboxError(f"{found} ({real}) is not an ELF binary")
            continue
        plan.add(f"bin/{real.name}", real)
        if name != real.name:
            plan.links[f"bin/{name}"] = real.name
    if missing:
        packages = {_DEBIAN_PACKAGE.get(name, "coreutils") for name in missing}
        why = f"missing binaries: {', '.join(missing)}"
        if not install:
            raise ToolboxError(f"{why} (still, after installing {', '.join(sorted(packages))})")
        _apt_install(packages, why)
        _add_tools(plan, install=False)
        return
    for name, target in _LINKS.items():
        plan.links[f"bin/{name}"] = target


BASH_LOADABLES = ("stat", "rm")
"""bash loadable builtins (Debian's bash-builtins) the control shell enables when present:
each one it uses as a builtin saves a fork and exec on every agent command."""
_BASH_LOADABLE_DIR = Path("/usr/lib/bash")


def _add_bash_loadables(plan: _Plan) -> None:
    """Copy the loadables into ``lib/bash/`` (optional: the control shell falls back
    to the binaries when they are missing)."""
    for name in BASH_LOADABLES:
        source = _BASH_LOADABLE_DIR / name
        if source.is_file() and _is_elf(source):
            plan.add(f"lib/bash/{name}", source)


ENTER_SOURCE = Path(__file__).with_name("enter.c")


def enter_binary() -> Path:
    """``tmax-enter`` (enter.c), compiled with the host's gcc into the cache, keyed by
    the source: every agent command runs through it."""
    source = ENTER_SOURCE.read_bytes()
    binary = default_cache_dir() / f"tmax-enter-{hashlib.sha256(source).hexdigest()[:16]}"
    if not binary.is_file():
        if shutil.which("gcc") is None:
            _apt_install(["gcc", "libc6-dev"], "gcc is missing (it builds bin/tmax-enter)")
        with file_lock(binary.with_suffix(".lock")):
            if not binary.is_file():
                tmp = binary.with_name(f".{binary.name}.{os.getpid()}")
                built = _run(["gcc", "-O2", "-Wall", "-Werror", "-o", str(tmp), str(ENTER_SOURCE)])
                if built.returncode != 0:
                    raise ToolboxError(f"gcc could not build {ENTER_SOURCE}: {built.stderr}")
                os.replace(tmp, binary)
    return binary


def _add_enter(plan: _Plan) -> None:
    binary = enter_binary()
    plan.add("bin/tmax-enter", binary)
    plan.built_from[binary] = ENTER_SOURCE


def _add_seccomp(plan: _Plan) -> None:
    for name, path in seccomp.filters().items():
        plan.add(f"lib/{name}", path)
        plan.built_from[path] = Path(seccomp.__file__)


_LDD_LINE = re.compile(r"^\s+(\S+)(?:\s+=>\s+(not found|\S+))?(?:\s+\(0x[0-9a-f]+\))?\s*$")


def _ldd(files: list[Path]) -> tuple[dict[str, Path], Path]:
    """Shared libraries (by the name the loader looks up) and the loader for ``files``.

    ldd lists the whole transitive closure of each file, so one pass over every ELF
    that is copied (executables and extension modules alike) finds every library.
    """
    libs: dict[str, Path] = {}
    loaders: set[Path] = set()
    problems: list[str] = []
    chunk = 200
    for start in range(0, len(files), chunk):
        batch = [str(f) for f in files[start : start + chunk]]
        result = _run(["ldd", *batch], env=_LDD_ENV)
        current = batch[0]
        for line in result.stdout.splitlines():
            if not line.startswith(("\t", " ")):
                current = line.rstrip(":")
                continue
            text = line.strip()
            if text in ("statically linked", "not a dynamic executable"):
                continue
            match = _LDD_LINE.match(line)
            if match is None:
                problems.append(f"{current}: unparsed ldd line {text!r}")
                continue
            name, path = match.group(1), match.group(2)
            if path == "not found":
                problems.append(f"{current}: {name} not found")
            elif path is None:
                if name.startswith("/"):
                    loaders.add(Path(name))  # the ELF interpreter
                # else the vDSO (linux-vdso.so.1), which the kernel provides
            else:
                libs.setdefault(name, Path(path))
        if result.returncode != 0 and not result.stdout.strip():
            problems.append(f"ldd failed: {result.stderr.strip()[:500]}")
    if problems:
        raise ToolboxError("cannot resolve shared libraries:\n" + "\n".join(problems))
    real_loaders = {Path(os.path.realpath(p)) for p in loaders}
    if len(real_loaders) != 1:
        raise ToolboxError(f"expected one dynamic loader, found {sorted(map(str, loaders))}")
    return libs, next(iter(loaders))


def _make_plan(python: str | None) -> _Plan:
    plan = _Plan(python=_python_info(python))
    _add_tools(plan)
    _add_bash_loadables(plan)
    _add_enter(plan)
    _add_seccomp(plan)
    _add_python(plan)
    roots = sorted({src for src in plan.files.values() if _is_elf(src)})
    libs, loader = _ldd(roots)
    # glibc dlopens libgcc_s for thread cancellation and unwinding (pthread_exit); ship it
    # so that never falls back to a library from the image.
    libc = libs.get("libc.so.6")
    if libc is not None and (libc.parent / "libgcc_s.so.1").exists():
        extra, _ = _ldd([libc.parent / "libgcc_s.so.1"])
        libs.setdefault("libgcc_s.so.1", libc.parent / "libgcc_s.so.1")
        for name, path in extra.items():
            libs.setdefault(name, path)
    plan.loader = loader.name
    plan.add(f"lib/{loader.name}", Path(os.path.realpath(loader)))
    for name, path in sorted(libs.items()):
        if name == loader.name:
            continue
        plan.add(f"lib/{Path(name).name}", Path(os.path.realpath(path)))
    return plan


# --- public API -----------------------------------------------------------------------


def toolbox_sources(python: str | None = None) -> list[Path]:
    """The host files the toolbox is built from, sorted (what :func:`toolbox_key` hashes)."""
    return _make_plan(python).sources()


def _key_for(plan: _Plan) -> str:
    digest = hashlib.sha256(f"tmax-toolbox-format-{FORMAT_VERSION}\0".encode())
    for src in plan.sources():
        digest.update(str(src).encode() + b"\0")
        with src.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def toolbox_key(python: str | None = None) -> str:
    """A short sha256 over the source files' paths and bytes and :data:`FORMAT_VERSION`.

    A changed host binary, library or Python file (a Debian security update) gives a
    new key and so a new toolbox directory: a cached toolbox is never patched in place.
    """
    return _key_for(_make_plan(python))


def _patchelf(args: list[str], path: Path) -> None:
    result = _run(["patchelf", *args, str(path)])
    if result.returncode != 0:
        raise ToolboxError(f"patchelf {' '.join(args)} {path} failed: {result.stderr.strip()}")


def _has_interpreter(path: Path) -> bool:
    return _run(["patchelf", "--print-interpreter", str(path)]).returncode == 0


def _has_dynamic_section(path: Path) -> bool:
    return _run(["patchelf", "--print-rpath", str(path)]).returncode == 0


def _void_path(original: bytes) -> bytes:
    """``/opt/tmax/void`` padded with slashes to exactly ``len(original)`` bytes.

    Same length, so code that copies the constant with ``sizeof`` still gets a whole
    string; the kernel ignores the extra slashes. The toolbox's top level holds only
    ``bin``, ``lib`` and ``MANIFEST.json`` (checked by the build) and is read-only,
    so neither this path nor one that starts with a truncated copy of it followed by
    other characters (``/opt/tmax/////vo`` + ``nf``) ever exists.
    """
    slashes = len(original) - len(TOOLBOX_MOUNT) - len(_VOID)
    if slashes < 1:
        raise ToolboxError(f"cannot redirect {original!r}: shorter than {TOOLBOX_MOUNT}/{_VOID}")
    return f"{TOOLBOX_MOUNT}{'/' * slashes}{_VOID}".encode()


def _redirect_strings(path: Path, originals: Iterable[tuple[bytes, bool]]) -> dict[str, int]:
    """Point host configuration paths compiled into ``path`` at ``/opt/tmax/void``.

    Every occurrence of each path is replaced, also where it is the head of a longer
    one (``.../gconv`` in ``.../gconv/gconv-modules.cache``). With ``head`` set, the
    first 16 bytes are replaced wherever they occur too: compilers build some strings
    on the stack from a 16-byte constant plus immediates (libc's ``/etc/nsswitch.co``
    + ``nf``), and the patched head alone makes that a non-existent path below
    ``/opt/tmax``. Only distinctive paths use ``head``; ``/usr/lib/x86_64-`` is not one.
    """
    data = path.read_bytes()
    counts: dict[str, int] = {}
    for original, head in originals:
        new = _void_path(original)
        count = data.count(original)
        data = data.replace(original, new)
        if head and len(original) > 16:
            if not new[len(TOOLBOX_MOUNT) : 16].strip(b"/"):
                # the head must name a top-level entry (vo...), not the toolbox root itself
                raise ToolboxError(f"cannot redirect the 16-byte head of {original!r}")
            count += data.count(original[:16])
            data = data.replace(original[:16], new[:16])
        counts[original.decode()] = count
    path.write_bytes(data)
    return counts


def _patch_tree(tmp: Path, plan: _Plan) -> dict[str, dict[str, int]]:
    """Point every ELF at the toolbox's loader and libraries; harden loader and libc."""
    interpreter = f"{_LIB_DIR}/{plan.loader}"
    loader_rel = f"lib/{plan.loader}"
    elves = sorted(rel for rel, src in plan.files.items() if rel != loader_rel and _is_elf(src))

    def patch(rel: str) -> None:
        path = tmp / rel
        if not _has_dynamic_section(path):
            return  # statically linked: nothing to load, nothing to patch
        args = ["--force-rpath", "--set-rpath", _LIB_DIR]
        if _has_interpreter(path):  # executables, and libc.so.6 (it runs as a program too)
            args = ["--set-interpreter", interpreter, *args]
        _patchelf(args, path)
        # A separate call: patchelf 0.14 drops --no-default-lib when combined with the above.
        _patchelf(["--no-default-lib"], path)

    with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
        list(pool.map(patch, elves))

    redirected: dict[str, dict[str, int]] = {}
    loader_counts = _redirect_strings(
        tmp / loader_rel, [(b"/etc/ld.so.preload", False), (b"/etc/ld.so.cache", False)]
    )
    if loader_counts["/etc/ld.so.preload"] == 0:
        raise ToolboxError(f"{plan.loader} has no /etc/ld.so.preload string to redirect")
    redirected[loader_rel] = loader_counts
    libc = tmp / "lib" / "libc.so.6"
    if libc.exists():
        gconv = re.search(rb"/[\x21-\x7e]*/gconv\0", libc.read_bytes())
        originals = [(b"/etc/nsswitch.conf", True)]
        if gconv:
            originals.append((gconv.group()[:-1], False))
        redirected["lib/libc.so.6"] = _redirect_strings(libc, originals)
    return redirected


def _check_pytest_imports(tmp: Path, plan: _Plan) -> None:
    """Import pytest and every ``_pytest`` module from the copied packages alone.

    Runs the host interpreter without its site directories, so a dependency that
    was not copied fails here, at build time, instead of inside a sandbox.
    """
    site = str(tmp / plan.python.site_rel)
    code = (
        "import importlib, pkgutil, sys\n"
        "site = sys.argv[1]\n"
        "sys.path.insert(0, site)\n"
        "import pytest, _pytest, pluggy, iniconfig, packaging.version\n"
        "for m in pkgutil.walk_packages(_pytest.__path__, '_pytest.'):\n"
        "    importlib.import_module(m.name)\n"
        "files = {getattr(m, '__file__', None) or '' for m in list(sys.modules.values())}\n"
        "print('\\n'.join(sorted(f for f in files if 'packages' in f and site not in f)))\n"
    )
    result = _run([str(plan.python.executable), "-I", "-S", "-B", "-c", code, site])
    if result.returncode != 0:
        raise ToolboxError(f"pytest does not import from the toolbox: {result.stderr[-2000:]}")
    if result.stdout.strip():
        raise ToolboxError(f"pytest imported modules from outside the toolbox: {result.stdout}")


def _finish_modes(root: Path) -> None:
    """Directories 0755, files 0644 or 0755: readable by any sandbox user, never writable."""
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                continue
            executable = path.stat().st_mode & 0o111 or (
                _is_elf(path) and (path.parent.name == "bin" or name.startswith("ld-"))
            )
            os.chmod(path, 0o755 if executable else 0o644)


def _build(dest: Path, plan: _Plan) -> Path:
    if shutil.which("patchelf") is None:
        _apt_install(["patchelf"], "patchelf is missing")
    key = _key_for(plan)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        for rel, src in sorted(plan.files.items()):
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)  # keeps mtimes: .pyc files stay valid for their .py
        for rel, link in sorted(plan.links.items()):
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(link, tmp / rel)
        redirected = _patch_tree(tmp, plan)
        _check_pytest_imports(tmp, plan)
        manifest = {
            "format": FORMAT_VERSION,
            "key": key,
            "mount": TOOLBOX_MOUNT,
            "loader": f"lib/{plan.loader}",
            "python": {
                "executable": str(plan.python.executable),
                "version": plan.python.version,
                "stdlib": f"lib/python{plan.python.xy}",
                "site": plan.python.site_rel,
            },
            "tools": sorted(
                rel.removeprefix("bin/")
                for rel in [*plan.files, *plan.links]
                if rel.startswith("bin/")
            ),
            "redirected_paths": redirected,
            "dropped": plan.dropped,
            "sources": [str(p) for p in plan.sources()],
        }
        (tmp / "MANIFEST.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        if set(os.listdir(tmp)) != _TOP_LEVEL:
            raise ToolboxError(f"unexpected toolbox top level: {sorted(os.listdir(tmp))}")
        _finish_modes(tmp)
        if dest.exists() or dest.is_symlink():
            # os.replace cannot overwrite a non-empty directory: move the old one aside.
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
            os.replace(dest, old / "toolbox")
            os.replace(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def build_toolbox(dest: Path, python: str | None = None) -> Path:
    """Build the toolbox into ``dest`` and return ``dest``.

    The tree is assembled in a temporary sibling directory and renamed onto ``dest``
    only when complete, so a crash never leaves a half-built toolbox at ``dest``.
    """
    return _build(Path(dest), _make_plan(python))


def ensure_toolbox(cache_dir: Path | None = None, python: str | None = None) -> Path:
    """Return ``cache_dir/toolbox-<key>``, building it first if it is not there yet.

    Builds are serialised with ``flock`` on a per-key lock file, so parallel workflow
    jobs build once and the others wait and reuse the result.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    plan = _make_plan(python)
    key = _key_for(plan)
    dest = cache / f"toolbox-{key}"
    if (dest / "MANIFEST.json").is_file():
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    with file_lock(cache / f".toolbox-{key}.lock"):
        if not (dest / "MANIFEST.json").is_file():
            _build(dest, plan)
    return dest
