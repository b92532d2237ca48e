"""The verifier's first process: PID 1 of a fresh PID and mount namespace in the sandbox.

Not imported by tmax: the control shell sends this file's text with each verification
and runs it with the toolbox's Python (``python3 -I -S -c``), so nothing the agent wrote
can replace it. Standard library only. It

* makes itself non-dumpable, so no process in the sandbox can ptrace it, read or write
  its memory or take over its file descriptors (``/proc/<pid>/mem``, ``/proc/<pid>/fd``);
* mounts its own ``/proc`` (masked like the agent's), a fresh tmpfs on ``/tests`` holding
  the task's tests (unpacked from stdin, a tar stream) and another on ``/logs/verifier``:
  neither is visible to the agent's processes, which live in another mount namespace;
* runs the tests with the agent's capabilities only and under the agent's seccomp filter
  (:mod:`tmax.sandbox.seccomp`; pytest keeps mount and umount until it has frozen the
  tests), in one of two modes:

  ``script``: Harbor's protocol. ``/tests/test.sh`` runs under the toolbox's bash; the
  reward is read from ``/logs/verifier`` after every process it left behind is killed.
  A script the agent's code killed or stopped, or that ran out of time, scores 0.
  ``reward.json`` is read only when the task's tests name it.

  ``pytest``: the verdict is pytest's exit status, seen by this process, and never a
  file. pytest runs in a non-dumpable child; after collection it makes ``/tests``
  read-only, takes every permission bit off what is in it, and drops the capabilities
  it needed for that, keeping the agent's CAP_DAC_OVERRIDE for itself alone (the tests
  read their data from ``/tests`` as they run). The programs the tests start run with
  the agent's capabilities less CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: they cannot
  read the tests, their data or their log (the answer key), cannot change them, cannot reach
  pytest or this process, and have no file to write that would count. Agent code the
  tests import into pytest itself is not kept from them.

* prints the outcome on stdout (the control channel) and exits; the kernel then kills
  whatever is left in the namespace.

Arguments: mode, timeout seconds, 1/0 (reward.json allowed), the agent's capabilities
(comma-separated numbers, ``-`` for none), the working directory (the image's, as
Harbor's ``docker exec`` has it), then pytest's test files. Stdin: the tests, as tar.
"""

import base64
import contextlib
import ctypes
import json
import os
import signal
import stat
import sys
import time

PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REMOUNT = 1, 2, 4, 8, 4096, 32
MS_REC, MS_PRIVATE = 16384, 1 << 18
CAP_LAST = 63
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
PATH = "/opt/tmax/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ENV = {
    "PATH": PATH,
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONNOUSERSITE": "1",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "OPENSSL_CONF": "/opt/tmax/no-openssl.cnf",
}
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "asound")
PROC_MASKED = ("kcore", "keys", "latency_stats", "timer_list", "timer_stats", "sched_debug",
               "acpi", "scsi")  # fmt: skip
LOG = "/logs/verifier/test-stdout.txt"
REWARD_FILES = ("reward.json", "reward.txt")
INI_FILES = ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
GUARD_MARKER = "/tests/.tmax-verifier-pidns"  # verifier_guard.MARKER
SESSION_DIR = "/tmp/.tmax-session"  # base.SESSION_DIR: the control shell's files
INTERPRETERS = {"/bin/sh": "bash", "/bin/bash": "bash", "/usr/bin/sh": "bash",
                "/usr/bin/bash": "bash", "/usr/bin/env": "env", "/bin/env": "env"}  # fmt: skip
"""Image paths the kernel (``#!/bin/bash``, ``#!/usr/bin/env python3``) and libc
(``system()``, ``popen()``, Python's ``shell=True``) run by name: for the verification,
the toolbox's bash and env are bound over them."""
OWN = ("/opt/tmax/", "/proc/", "/sys/", "/dev/", "/tests/", "/logs/", SESSION_DIR)
ST_RDONLY = 1

libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def mount(source, target, fstype, flags, data=""):
    _check(
        libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                   ctypes.c_ulong(flags), data.encode() if data else None),
        f"mount {target}",
    )  # fmt: skip


def read_only(path):
    mount(path, path, "", MS_BIND | MS_REC)
    mount(path, path, "", MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def mask_proc():
    for name in PROC_READ_ONLY:
        if os.path.exists(f"/proc/{name}"):
            read_only(f"/proc/{name}")
    for name in PROC_MASKED:
        path = f"/proc/{name}"
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", MS_RDONLY, "size=0")
        elif os.path.exists(path):
            mount("/dev/null", path, "", MS_BIND)


def cover_interpreters():
    """Bind the toolbox's bash and env over what :data:`INTERPRETERS` resolve to in the
    image (a regular file of the image: not our own mounts), read-only; a path the agent
    made something else (a directory, nothing) stays as it is, and cannot run."""
    covered = set()
    for path, tool in INTERPRETERS.items():
        real = os.path.realpath(path)
        if real in covered or real.startswith(OWN):
            continue
        try:
            if not stat.S_ISREG(os.stat(real).st_mode):
                continue
            mount(f"/opt/tmax/bin/{tool}", real, "", MS_BIND)
        except OSError:
            continue
        covered.add(real)
        with contextlib.suppress(OSError):
            mount("", real, "", MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        if not os.statvfs(real).f_flag & ST_RDONLY:  # never a writable path to the toolbox
            libc.umount2(real.encode(), 2)


def real_directory(path):
    """``path`` as a directory of its own: a symlink or file the agent left there goes."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISDIR(info.st_mode):
        os.unlink(path)
        info = None
    if info is None:
        os.mkdir(path, 0o755)


def drop_capabilities(keep, own=()):
    """Keep only ``keep`` (the agent's capability numbers); of these, ``own`` for this
    process alone: what it executes gets ``keep`` less ``own`` (the bounding set)."""
    keep_bits = set(keep)
    for bit in range(CAP_LAST + 1):
        if bit not in keep_bits or bit in own:
            libc.prctl(PR_CAPBSET_DROP, bit, 0, 0, 0)  # EINVAL past the kernel's last cap

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]  # fmt: skip

    mask = sum(1 << bit for bit in keep_bits)
    low, high = mask & 0xFFFFFFFF, mask >> 32
    data = (Data * 2)(Data(low, low, 0), Data(high, high, 0))
    _check(libc.capset(ctypes.byref(Header(0x20080522, 0)), data), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def hide(root):
    """Take every permission bit off what is below ``root`` (and ``root``): a process
    without CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH can then neither list nor read it,
    though it runs as its owner. The guard's marker stays readable (not a secret)."""
    for parent, dirs, names in os.walk(root, topdown=False):
        for name in dirs + names:
            path = os.path.join(parent, name)
            if path != GUARD_MARKER and not os.path.islink(path):
                os.chmod(path, 0)
    os.chmod(root, 0o111)  # searchable, not listable: the marker is reached by name


def to_log():
    fd = os.open(LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(null)


def load_filter(name):
    """The toolbox's seccomp program ``name`` (tmax.sandbox.seccomp), for this process
    and all it starts; it needs no_new_privs, which nothing here gives up."""
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    with open(f"/opt/tmax/lib/{name}", "rb") as handle:
        program = handle.read()
    if not program or len(program) % 8:
        raise SystemExit(f"{name}: not a seccomp program ({len(program)} bytes)")

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    prog = Program(len(program) // 8, program)
    _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), name)


def enter(workdir):
    try:
        os.chdir(workdir)
    except OSError:
        os.chdir("/")


def run_script(keep, workdir):
    to_log()
    drop_capabilities(keep)
    load_filter("seccomp.bpf")
    enter(workdir)
    os.execve("/opt/tmax/bin/bash", ["bash", "/tests/test.sh"], ENV)


def toolbox_modules_first():
    """The guard's (the toolbox's sitecustomize) resolution of the standard library's and
    the toolbox's modules from the toolbox only, for the tests' own pytest: a test that
    puts the agent's directory on ``sys.path`` cannot shadow what pytest imports later."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.__file__), "sitecustomize.py")  # the toolbox's
    spec = importlib.util.spec_from_file_location("tmax_verifier_guard", path)
    guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard)
    guard.toolbox_modules_first()


def run_pytest(keep, workdir, files):
    to_log()
    load_filter("seccomp-mounts.bpf")  # the guard below still mounts
    os.environ.clear()
    os.environ.update(ENV)
    enter(workdir)
    with open("/opt/tmax/MANIFEST.json") as handle:  # started with -S: no site-packages
        sys.path.insert(0, "/opt/tmax/" + json.load(handle)["python"]["site"])
    toolbox_modules_first()
    import pytest  # the toolbox's

    class Guard:
        """Freeze the tests and drop privileges once pytest has read them."""

        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(self, session):
            own = [cap for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) if cap in keep]
            if own:  # else pytest could not read them either: the agent's uid owns them
                hide("/tests")
                os.chmod(LOG, 0)  # what failed tests printed names expected answers
            read_only("/tests")
            drop_capabilities(keep, own=own)
            load_filter("seccomp.bpf")

    ini = next(f"/tests/{name}" for name in INI_FILES if os.path.exists(f"/tests/{name}"))
    args = ["-q", "-p", "no:cacheprovider", "-c", ini, "--rootdir=/tests",
            "--confcutdir=/tests", *[f"/tests/{name}" for name in files]]  # fmt: skip
    code = pytest.main(args, plugins=[Guard()])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


def read_reward_files(json_allowed):
    found = {}
    for name in REWARD_FILES:
        if name == "reward.json" and not json_allowed:
            continue
        try:
            fd = os.open(f"/logs/verifier/{name}", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                found[name] = os.read(fd, 4096)
        finally:
            os.close(fd)
    return found


def tail(path, size):
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - size))
            return handle.read()
    except OSError:
        return b""


def say(*fields):
    os.write(1, (" ".join(fields) + "\n").encode())


def main():
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)  # an init ignores default-action signals
    mode, timeout, json_allowed, keep, workdir, *files = sys.argv[1:]
    keep = [int(bit) for bit in keep.split(",") if bit.isdigit()]
    mount("", "/", "", MS_REC | MS_PRIVATE)
    fresh_proc = True
    try:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError:
        fresh_proc = False  # where none may be mounted the old /proc stays (base.py)
    if fresh_proc:
        mask_proc()
    real_directory("/logs")
    real_directory("/logs/verifier")
    real_directory("/tests")
    mount("tmpfs", "/logs/verifier", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=755")
    mount("tmpfs", "/tests", "tmpfs", MS_NOSUID | MS_NODEV, "size=2g,mode=755")
    if os.path.isdir(SESSION_DIR) and not os.path.islink(SESSION_DIR):
        with contextlib.suppress(OSError):  # where it can: the control shell uses fds only
            mount("tmpfs", SESSION_DIR, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=0")
    cover_interpreters()
    untar = os.fork()  # the tests arrive on stdin as a tar stream, and nothing else does
    if untar == 0:
        os.execv("/opt/tmax/bin/tar", ["tar", "-x", "-f", "-", "-C", "/tests", "--no-same-owner"])
    if os.waitpid(untar, 0)[1] != 0:
        raise SystemExit("could not unpack the tests")
    for root, dirs, names in os.walk("/tests"):
        for name in dirs + names:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, os.lstat(path).st_mode | 0o444 | (0o111 if name in dirs else 0))

    # Without an ini file of the tests' own, pytest would look for one in / and take
    # the agent's (addopts, pythonpath, plugins): stop the search in /tests.
    if not any(os.path.exists(f"/tests/{name}") for name in INI_FILES):
        with open("/tests/pytest.ini", "w") as handle:
            handle.write("[pytest]\n")
    signal.signal(signal.SIGCHLD, lambda *_: None)  # not ignored: sigtimedwait sees it
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
    # The toolbox Python's sitecustomize (tmax.sandbox.verifier_guard) locks the reward
    # directory away from the Python processes of this PID namespace (but us, and a
    # grader test.sh starts): it needs the namespace and test.sh's PID, the child's.
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(write_end)
        os.read(read_end, 1)  # until the marker names us
        os.close(read_end)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        try:
            if mode == "pytest":
                run_pytest(keep, workdir, files)
            else:
                run_script(keep, workdir)
        except BaseException as error:  # reported through the log
            os.write(2, f"tmax verifier: {error!r}\n".encode())
        os._exit(126)
    os.close(read_end)
    with open(GUARD_MARKER, "w") as handle:
        handle.write(f"{os.readlink('/proc/self/ns/pid')} {child}\n")
    os.write(write_end, b"x")
    os.close(write_end)
    deadline = time.monotonic() + float(timeout)
    status = None
    timed_out = False
    while status is None:
        pid, code = os.waitpid(-1, os.WNOHANG)  # reap orphans too: we are their init
        if pid == child:
            status = code
        elif pid == 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0 and not timed_out:
                timed_out = True
                os.kill(child, signal.SIGKILL)
            # Woken the moment a child ends, so what the tests left behind is killed
            # right after they finish (a process racing the reward file has no time).
            signal.sigtimedwait([signal.SIGCHLD], max(0.001, min(remaining, 1.0)))
    with contextlib.suppress(ProcessLookupError):  # nothing left
        os.kill(-1, signal.SIGKILL)  # everything the tests left behind, before reading
    try:
        while os.waitpid(-1, 0)[0] > 0:
            pass
    except ChildProcessError:
        pass
    killed = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + killed
    if mode == "script":
        for name, data in read_reward_files(json_allowed == "1").items():
            say("__TMAX_FILE__", name, base64.b64encode(data).decode())
    say("__TMAX_LOG__", base64.b64encode(tail(LOG, 20000)).decode())
    say("__TMAX_STATUS__", str(exit_code), str(killed), str(int(timed_out)))


main()
