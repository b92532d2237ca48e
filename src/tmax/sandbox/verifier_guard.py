"""The toolbox Python's ``sitecustomize``: lock the verifier's reward directory away from
every Python process the tests start.

Copied into the toolbox (``lib/python3.X/sitecustomize.py``), so it runs first in each
toolbox Python process, before any code of the agent's can (a test runner importing
the agent's modules, or the agent's script). Inside a verification (PID 1 of the PID
namespace is the verifier's first process, :mod:`tmax.sandbox.verifier_init`), and
only in processes other than that one, it applies a Landlock ruleset that

* denies creating, writing, truncating, renaming or removing anything below
  ``/logs/verifier`` (and creating new entries directly in ``/``): ``test.sh``'s own
  shell, and a grading script it runs, still write the reward there; pytest, and
  everything the tests start, cannot;
* denies ptrace of, and (kernel ≥ 6.12) signals to, processes outside the ruleset:
  ``test.sh`` and the verifier.

The ruleset is inherited by every child and cannot be lifted, so a program the tests
run, a background job it leaves or a planted ``conftest.py`` cannot race or replace
the reward file ``test.sh`` writes. Without Landlock (old kernels) nothing happens.

In every toolbox Python of a verification (the verifier's own pytest included, through
:func:`toolbox_modules_first`), the standard library's and the toolbox's own top-level
modules (pytest, ``_pytest``, pluggy, iniconfig, packaging, ...) are found only in the
toolbox: ``python3 -m pytest`` run in the agent's working directory puts that
directory first on ``sys.path``, and a ``pytest.py``, ``_pytest/``, ``json.py`` or
``pluggy/`` the agent left there would otherwise be imported in their place (and decide
the verdict). A name the toolbox does not have is still found where ``sys.path``
says (the task's own code, which a SWE-bench-style test imports on purpose), unless it
is one that pytest or the standard library only probes for (:data:`PROBED`): those
stay missing. Standard library only; never raises.
"""

import contextlib
import ctypes
import os
import sys

MARKER = "/tests/.tmax-verifier-pidns"
"""Written by the verifier's first process into its own /tests tmpfs: the identity of
its PID namespace and the PID of ``test.sh`` in it."""

_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_SCOPE_SIGNAL = 1 << 1
_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446  # the same on x86-64 and arm64
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
TOOLBOX = "/opt/tmax/"
PROBED = frozenset({
    "pygments", "argcomplete", "exceptiongroup", "tomli", "colorama", "xdist", "pexpect",
    "typing_extensions", "importlib_metadata", "zipp", "attr", "attrs", "py",
})  # fmt: skip
"""Modules pytest, pluggy or the standard library import only if present (``try:
import ...``): never taken from outside the toolbox in a verification's toolbox Python."""


class _ToolboxFirst:
    """A meta-path finder, just before the path finder: a protected top-level name is
    looked for in the toolbox's own ``sys.path`` entries only (missing if not there);
    submodules follow their package's ``__path__``, which is then the toolbox's too."""

    def __init__(self, names: frozenset, paths: list) -> None:
        self.names, self.paths = names, paths

    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in self.names:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, self.paths)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r} in the toolbox", name=name)
        return spec

    def invalidate_caches(self) -> None:
        pass


def toolbox_modules_first() -> None:
    """Install :class:`_ToolboxFirst` (once) for the standard library's names, every
    top-level module in the toolbox's ``sys.path`` entries, and :data:`PROBED`."""
    if any(isinstance(finder, _ToolboxFirst) for finder in sys.meta_path):
        return
    paths = [entry for entry in sys.path if entry.startswith(TOOLBOX)]
    names = set(sys.stdlib_module_names) | PROBED
    for entry in paths:
        with contextlib.suppress(OSError):
            for item in os.listdir(entry):
                stem = item.split(".", 1)[0]
                if stem.isidentifier():
                    names.add(stem)
    import importlib.machinery

    where = next(
        (i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
        len(sys.meta_path),
    )
    sys.meta_path.insert(where, _ToolboxFirst(frozenset(names), paths))


def _in_verification() -> bool:
    """Whether this process is in a verification's PID namespace (the marker names it)."""
    try:
        with open(MARKER) as handle:
            return handle.read().split()[0] == os.readlink("/proc/self/ns/pid")
    except (OSError, IndexError):
        return False


def _verifying() -> bool:
    """Whether to lock this process: it is in the verification's PID namespace, and not
    the verifier itself nor a Python that ``test.sh`` started to grade (a direct child
    not running pytest), since graders write the reward file themselves. pytest started
    by ``test.sh`` is locked (the agent's modules run inside it) unless its arguments
    name a file below /logs/verifier (a JUnit or CTRF report it must write there)."""
    if os.getpid() == 1:
        return False  # the verifier itself
    try:
        with open(MARKER) as handle:
            namespace, script = handle.read().split()
        if namespace != os.readlink("/proc/self/ns/pid"):
            return False
    except (OSError, ValueError):
        return False
    if str(os.getppid()) != script:
        return True  # started by the tests' processes, not by test.sh itself
    argv = getattr(sys, "orig_argv", sys.argv)
    pytest = any(arg.endswith("pytest") or arg.startswith("pytest") for arg in argv[1:3])
    return pytest and not any("/logs/verifier" in arg for arg in argv)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _lock() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return
    handled = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    handled |= (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(handled, 0, _SCOPE_SIGNAL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return
    file_rights = _WRITE_FILE | (_TRUNCATE if abi >= 3 else 0)
    allowed = [f"/{name}" for name in os.listdir("/") if name != "logs"]
    allowed += [f"/logs/{name}" for name in os.listdir("/logs") if name != "verifier"]
    for path in allowed:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            rights = handled if os.path.isdir(path) else file_rights
            rule = _PathBeneath(rights, fd)
            libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0)
        finally:
            os.close(fd)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    libc.syscall(_RESTRICT, ruleset, 0)
    os.close(ruleset)


if __name__ == "sitecustomize" and _in_verification():  # not when loaded by the verifier
    with contextlib.suppress(Exception):  # a guard that cannot apply must not break tests
        toolbox_modules_first()
    if _verifying():
        with contextlib.suppress(Exception):
            _lock()
