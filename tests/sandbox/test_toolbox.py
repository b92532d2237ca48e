"""The toolbox must work with nothing but itself: run it in bubblewrap on an EMPTY root.

With ``--tmpfs /`` there is no /lib, /usr or /etc in the sandbox, so any binary that
still needed the host's loader, libc or Python standard library would fail to start.
That is the strongest proof that an agent replacing those files in a task image
cannot change how the control shell and the verifier run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tmax.sandbox import verifier_guard
from tmax.sandbox.toolbox import (
    TOOLBOX_MOUNT,
    build_toolbox,
    ensure_toolbox,
    toolbox_key,
    toolbox_sources,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"),
    pytest.mark.skipif(shutil.which("patchelf") is None, reason="patchelf is not installed"),
]

BIN = f"{TOOLBOX_MOUNT}/bin"
LIB = f"{TOOLBOX_MOUNT}/lib"


def _bwrap_base(toolbox: Path) -> list[str]:
    return [
        "bwrap",
        "--tmpfs", "/",
        "--ro-bind", str(toolbox), TOOLBOX_MOUNT,
        "--proc", "/proc",
        "--dev", "/dev",
        "--tmpfs", "/tmp",
        "--unshare-all",
        "--die-with-parent",
        "--cap-drop", "ALL",
        "--clearenv",
        "--setenv", "PATH", BIN,
    ]  # fmt: skip


def run_in_empty_root(
    toolbox: Path, script: str, extra: Sequence[str] = (), timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with the toolbox's bash in a sandbox whose root is an empty tmpfs."""
    cmd = [*_bwrap_base(toolbox), *extra, f"{BIN}/bash", "-c", script]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def toolbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "--cap-drop", "ALL", "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"bwrap cannot create a sandbox here: {probe.stderr.strip()}")
    dest = tmp_path_factory.mktemp("toolbox") / "tb"
    started = time.monotonic()
    built = build_toolbox(dest)
    print(f"toolbox built in {time.monotonic() - started:.1f}s")
    return built


@pytest.fixture(scope="module")
def manifest(toolbox: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((toolbox / "MANIFEST.json").read_text())
    return data


# --- the empty-root sandbox ---------------------------------------------------------


def test_bash_and_timeout(toolbox: Path) -> None:
    result = run_in_empty_root(
        toolbox,
        'timeout 1 sleep 5; echo "rc=$?"; '
        "readlink /proc/$$/exe; sh -c 'echo \"sh is bash $BASH_VERSION\"'; "
        "test -e /usr || test -e /lib || test -e /etc || echo empty-root",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "rc=124"
    assert lines[1] == f"{BIN}/bash"
    assert lines[2].startswith("sh is bash 5")
    assert lines[3] == "empty-root"


def test_shell_tools(toolbox: Path) -> None:
    # Not `tar -z`: GNU tar starts its compressor through a hard-coded /bin/sh, which
    # does not exist here (and in a task image is the agent's). Pipe through gzip.
    script = r"""
set -euo pipefail
cd /tmp
mkdir -p data/sub
printf 'alpha 1\nbeta 2\ngamma 3\n' > data/a.txt
seq 1 5 > data/sub/n.txt
cp data/a.txt data/b.txt && sed -i 's/beta/BETA/' data/b.txt
tar cf data.tar data
tar tf data.tar | sort | tr '\n' ' '; echo
mkdir out && gzip -c data.tar > data.tgz && gzip -dc data.tgz | tar xf - -C out
grep -c a out/data/a.txt
awk '{s += $2} END {print s}' data/a.txt
find data -name '*.txt' | sort | xargs wc -l | tail -n 1 | awk '{print $1}'
diff data/a.txt data/b.txt > d.txt || echo "diff rc=$?"
grep -q '^> BETA 2$' d.txt && echo diff-ok
cmp -s data/a.txt out/data/a.txt && echo cmp-same
printf hi | sha256sum | cut -c1-16
printf hi | base64
echo aGk= | base64 -d; echo
stat -c %s data/a.txt
basename "$(realpath data/sub/n.txt)" .txt
f=$(mktemp); echo x | tee "$f" > /dev/null; cat "$f"; rm -f "$f"
date -u -d @0 +%Y
gzip -c data/a.txt | gzip -dc | head -n 1 | tr a-z A-Z
id -u
"""
    result = run_in_empty_root(toolbox, script)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "data/ data/a.txt data/b.txt data/sub/ data/sub/n.txt ",
        "3",
        "6",
        "11",
        "diff rc=1",
        "diff-ok",
        "cmp-same",
        "8f434346648f6b96",
        "aGk=",
        "hi",
        "23",
        "n",
        "x",
        "1970",
        "ALPHA 1",
        "0",
    ]


def _host_python_has(module: str) -> bool:
    probe = subprocess.run(["/usr/bin/python3", "-I", "-c", f"import {module}"], check=False)
    return probe.returncode == 0


def test_python_stdlib(toolbox: Path) -> None:
    optional = [m for m in ("ssl", "sqlite3", "ctypes") if _host_python_has(m)]
    modules = ["json", "hashlib", "zlib", *optional]
    code = (
        f"import sys, {', '.join(modules)}\n"
        "assert sys.prefix == sys.exec_prefix == '/opt/tmax', sys.prefix\n"
        "assert all(p.startswith('/opt/tmax/') for p in sys.path if p), sys.path\n"
        "assert hashlib.sha256(b'x').hexdigest().startswith('2d711642')\n"
        "assert zlib.decompress(zlib.compress(b'abc')) == b'abc'\n"
        "if 'sqlite3' in sys.modules:\n"
        "    assert sqlite3.connect(':memory:').execute('select 6*7').fetchone() == (42,)\n"
        "if 'ssl' in sys.modules:\n"
        "    ssl.create_default_context()\n"
        "if 'ctypes' in sys.modules:\n"
        "    assert ctypes.CDLL('libc.so.6').getpid() > 0\n"
        "print('ok', sys.version.split()[0])\n"
    )
    result = run_in_empty_root(toolbox, f'python3 -c "{code}"')
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok 3.")


def test_pytest_passes_and_fails(toolbox: Path) -> None:
    script = r"""
cd /tmp
printf 'import pytest\n\n@pytest.mark.parametrize("x", [1, 2])\ndef test_ok(x, tmp_path):\n    (tmp_path / "f").write_text("y")\n    assert x > 0\n' > test_x.py
printf 'def test_bad():\n    assert 1 + 1 == 3\n' > test_y.py
python3 -m pytest -q -p no:cacheprovider /tmp/test_x.py; echo "pass rc=$?"
python3 -m pytest -q -p no:cacheprovider /tmp/test_y.py; echo "fail rc=$?"
"""  # noqa: E501
    result = run_in_empty_root(toolbox, script)
    assert result.returncode == 0, result.stderr
    assert "2 passed" in result.stdout
    assert "pass rc=0" in result.stdout
    assert "1 failed" in result.stdout
    assert "assert (1 + 1) == 3" in result.stdout  # assertion rewriting works
    assert "fail rc=1" in result.stdout


def test_image_configuration_is_ignored(toolbox: Path, tmp_path: Path) -> None:
    """Files an agent can plant in the image must not inject code into toolbox processes."""
    etc = tmp_path / "etc"
    (etc / "python3.11").mkdir(parents=True)
    (etc / "ld.so.preload").write_text("/tmp/evil.so\n")
    (etc / "nsswitch.conf").write_text("passwd: evil\ngroup: evil\n")
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (etc / "python3.11" / "sitecustomize.py").write_text("print('PWNED')\n")
    result = run_in_empty_root(
        toolbox,
        "id -un; python3 -c 'import sitecustomize; print(\"py\", sitecustomize.__file__)'; "
        "python3 -c 'import ctypes; ctypes.CDLL(\"libmissing.so.1\")' || echo no-lib",
        extra=["--ro-bind", str(etc), "/etc", "--setenv", "LD_DEBUG", "libs"],
    )
    assert result.returncode == 0, result.stderr
    # the toolbox's own sitecustomize (tmax.sandbox.verifier_guard), not the image's
    assert result.stdout.splitlines() == [
        "root", "py /opt/tmax/lib/python3.11/sitecustomize.py", "no-lib"
    ]  # fmt: skip
    assert "ld.so.preload" not in result.stderr
    # a library that is not in the toolbox is looked for in /opt/tmax/lib only: not in
    # the image's /lib and /usr/lib (DF_1_NODEFLIB) nor its /etc/ld.so.cache (redirected)
    assert "find library=libmissing.so.1" in result.stderr
    assert "system search path" not in result.stderr
    caches = re.findall(r"search cache=(\S+)", result.stderr)
    assert caches and all(c.startswith(f"{TOOLBOX_MOUNT}/") for c in caches), caches
    assert "libnss_evil" not in result.stderr
    # every library the loader looked up, it looked up in the toolbox only
    searched = re.findall(r"search path=(\S+)", result.stderr)
    assert searched
    for path in searched:
        assert all(d.startswith(f"{LIB}/") or d == LIB for d in path.split(":")), path


def test_works_on_a_sabotaged_host_root(toolbox: Path, tmp_path: Path) -> None:
    """The host's real root, but with a garbage libc and loader and a stub python3."""
    libc = Path(os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6"))
    loader = Path(os.path.realpath("/lib64/ld-linux-x86-64.so.2"))
    if not (libc.is_file() and loader.is_file() and Path("/opt").is_dir()):
        pytest.skip("not an x86-64 glibc host with /opt")
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x7fELF" + b"\0" * 64)
    stub = tmp_path / "python3"
    stub.write_text("#!/bin/sh\necho STUB\n")
    stub.chmod(0o755)
    cmd = [
        "bwrap",
        "--ro-bind", "/", "/",
        "--ro-bind", str(garbage), str(libc),
        "--ro-bind", str(garbage), str(loader),
        "--ro-bind", str(stub), "/usr/bin/python3",
        "--tmpfs", "/opt",
        "--ro-bind", str(toolbox), TOOLBOX_MOUNT,
        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
        "--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "--clearenv",
        "--setenv", "PATH", f"{BIN}:/usr/bin:/bin",
        f"{BIN}/bash", "-c",
        "/usr/bin/true || echo host-broken; python3 -c 'print(6 * 7)'; "
        "python3 -m pytest --version 2>&1 | head -c 6; echo",
    ]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["host-broken", "42", "pytest"]


# --- the tree itself ------------------------------------------------------------------


def _elf_files(root: Path) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as handle:
                if handle.read(4) == b"\x7fELF":
                    found.append(path)
    return found


def _patchelf(flag: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["patchelf", flag, str(path)], capture_output=True, text=True)


def test_every_elf_loads_only_from_the_toolbox(toolbox: Path, manifest: dict[str, object]) -> None:
    loader = toolbox / str(manifest["loader"])
    assert loader.is_file() and os.access(loader, os.X_OK)
    elves = _elf_files(toolbox)
    assert len(elves) > 50
    executables = 0
    for path in elves:
        if path == loader:
            continue
        interp = _patchelf("--print-interpreter", path)
        if interp.returncode == 0:
            executables += 1
            assert interp.stdout.strip() == f"{LIB}/{loader.name}", path
        assert _patchelf("--print-rpath", path).stdout.strip() == LIB, path
    assert executables >= len(list((toolbox / "bin").iterdir())) - 10  # minus symlinks
    readelf = shutil.which("readelf")
    if readelf is not None:
        for path in elves:
            if path == loader:
                continue
            dynamic = subprocess.run([readelf, "-d", str(path)], capture_output=True, text=True)
            assert "(RPATH)" in dynamic.stdout and "(RUNPATH)" not in dynamic.stdout, path
            assert "NODEFLIB" in dynamic.stdout, path


def test_tree_layout(toolbox: Path, manifest: dict[str, object]) -> None:
    bin_dir = toolbox / "bin"
    assert (bin_dir.stat().st_mode & 0o777) == 0o755
    for entry in bin_dir.iterdir():
        if entry.is_symlink():
            target = os.readlink(entry)
            assert "/" not in target, (entry, target)  # relative, stays valid when mounted
            assert (bin_dir / target).is_file(), entry
        else:
            assert entry.read_bytes()[:4] == b"\x7fELF", f"{entry} is not an ELF binary"
            assert (entry.stat().st_mode & 0o777) == 0o755, entry
    assert os.readlink(bin_dir / "sh") == "bash"
    for path in toolbox.rglob("*"):
        if path.is_symlink():
            assert path.resolve().is_relative_to(toolbox.resolve()), path
        else:
            assert not path.stat().st_mode & 0o022, f"{path} is group/world writable"
    python = manifest["python"]
    assert isinstance(python, dict)
    assert (toolbox / python["stdlib"] / "os.py").is_file()
    assert (toolbox / python["stdlib"] / "lib-dynload").is_dir()
    assert (toolbox / python["site"] / "pytest" / "__init__.py").is_file()
    # Debian's sitecustomize (a link to /etc in the image) is dropped; ours is copied
    guard = Path(verifier_guard.__file__).read_bytes()
    assert (toolbox / python["stdlib"] / "sitecustomize.py").read_bytes() == guard
    assert not (toolbox / "void").exists()
    assert python["executable"] == os.path.realpath("/usr/bin/python3")
    assert manifest["key"] == toolbox_key()
    assert manifest["mount"] == TOOLBOX_MOUNT


# --- key and cache --------------------------------------------------------------------


def test_sources_and_key_are_stable() -> None:
    sources = toolbox_sources()
    assert Path(os.path.realpath("/usr/bin/python3")) in sources
    assert Path("/usr/bin/bash") in sources
    assert not any(p.suffix == ".pyc" for p in sources)
    key = toolbox_key()
    assert re.fullmatch(r"[0-9a-f]{16}", key)
    assert toolbox_key() == key


def test_ensure_toolbox_builds_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(max_workers=3) as pool:
        paths = list(pool.map(lambda _: ensure_toolbox(cache), range(3)))
    assert len(set(paths)) == 1
    first = paths[0]
    assert first == cache / f"toolbox-{toolbox_key()}"
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == [first.name]
    stamp = (first / "MANIFEST.json").stat().st_mtime_ns
    assert ensure_toolbox(cache) == first
    assert (first / "MANIFEST.json").stat().st_mtime_ns == stamp
    # the default cache location honours TMAX_CACHE
    monkeypatch.setenv("TMAX_CACHE", str(cache))
    assert ensure_toolbox() == first


def test_build_replaces_an_existing_tree(tmp_path: Path) -> None:
    dest = tmp_path / "tb"
    dest.mkdir()
    (dest / "stale").write_text("old")
    assert build_toolbox(dest) == dest
    assert not (dest / "stale").exists()
    assert (dest / "MANIFEST.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["tb"]  # no temporary siblings left
