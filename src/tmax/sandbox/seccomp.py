"""The seccomp filter every agent command and every verifier runs under, on every backend.

bwrap applies none of its own and an unprivileged user namespace hands a process every
capability inside it, so without a filter an agent can reach the parts of the kernel
that namespaces expose to anyone (new user namespaces and the mounts they allow, BPF,
keyrings, io_uring, perf): the usual road to a kernel bug, and nothing a terminal task
needs. Podman applies its default profile as well; filters stack, so there both hold.

The filter is a denylist in the spirit of the container runtimes' default profiles:
everything is allowed except

- creating or joining namespaces: ``unshare``, ``setns``, and ``clone`` with any
  ``CLONE_NEW*`` flag; ``clone3`` (whose flags live in memory a filter cannot read)
  answers ENOSYS, so the C library falls back to ``clone``, which can be checked;
- mounting and the new mount API, ``pivot_root``, ``chroot``;
- kernel surfaces no task needs: BPF, perf events, keyrings, io_uring, userfaultfd,
  module loading, kexec, swap, reboot, the clock, accounting, quotas, file handles,
  writing another process's memory (``process_vm_writev``)... (see :data:`DENIED`).

A denied call fails with EPERM, as it would for a process without the privilege, so a
program that probes for a feature falls back instead of dying. The verifier's own init
mounts before it loads the filter (``mounts=True`` keeps mount and umount for the one
step, between collecting and running the tests, that still needs them).

The programs are compiled by libseccomp (``libseccomp.so.2``, present wherever systemd
is) through ctypes, for the host's native architecture and its 32-bit companions (a
32-bit binary in an image gets the same filter under its own syscall numbers; x32 is
refused outright), into the toolbox as ``lib/seccomp.bpf`` and ``lib/seccomp-mounts.bpf``.
``tmax-enter`` and ``verifier_init`` load them with ``prctl(PR_SET_SECCOMP)`` and refuse
to run a command when they cannot.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import hashlib
import os
import platform
from pathlib import Path

from tmax.io import cache_dir as default_cache_dir
from tmax.io import file_lock

DENIED = (
    # namespaces (clone is checked by flag, clone3 below)
    "unshare", "setns",
    # mounts
    "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount",
    "fspick", "move_mount", "open_tree", "mount_setattr",
    # kernel surfaces
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "keyctl", "add_key", "request_key", "init_module",
    "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
    "swapoff", "acct", "quotactl", "quotactl_fd", "lookup_dcookie", "open_by_handle_at",
    "name_to_handle_at", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "stime", "syslog", "iopl", "ioperm", "vm86", "vm86old", "uselib", "ustat", "sysfs",
    "_sysctl", "nfsservctl", "create_module", "get_kernel_syms", "query_module",
    "process_vm_writev", "vhangup", "fanotify_init",
)  # fmt: skip
MOUNTS = ("mount", "umount", "umount2")

CLONE_NEW = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
    "CLONE_NEWTIME": 0x00000080,
}
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_ERRNO_BASE = 0x00050000
SCMP_CMP_MASKED_EQ = 7
SCMP_FLTATR_ACT_BADARCH = 2
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
# audit architectures: the native one and what runs beside it
ARCHES = {
    "x86_64": (0xC000003E, 0x40000003),  # x86_64, i386 (x32 is refused: see _compile)
    "aarch64": (0xC00000B7, 0x40000028),  # aarch64, arm
    "ppc64le": (0xC0000015,),
}
FILES = {"seccomp.bpf": False, "seccomp-mounts.bpf": True}  # name: keeps mount, umount


class SeccompError(RuntimeError):
    """The filter cannot be compiled on this host."""


class _Cmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]  # fmt: skip


def _errno(code: int) -> int:
    return SCMP_ACT_ERRNO_BASE | code


def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as error:
        raise SeccompError(
            f"libseccomp is missing ({error}); it compiles the sandbox's seccomp filter. "
            "Install it: apt-get install libseccomp2 (./setup.sh does)"
        ) from error
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(_Cmp)]  # fmt: skip
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def _check(code: int, what: str) -> None:
    if code < 0:
        raise SeccompError(f"libseccomp: {what}: {os.strerror(-code)}")


def _compile(lib: ctypes.CDLL, mounts: bool, fd: int) -> None:
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompError("libseccomp: seccomp_init failed")
    try:
        # a call of an architecture the filter does not know (x32 on x86_64) is refused
        refuse = _errno(errno.ENOSYS)
        _check(lib.seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, refuse), "bad-arch action")
        for arch in ARCHES.get(platform.machine(), ())[1:]:
            code = lib.seccomp_arch_add(ctx, arch)
            if code < 0 and -code != errno.EEXIST:
                _check(code, f"architecture {arch:#x}")
        denied = [name for name in DENIED if not (mounts and name in MOUNTS)]
        for name in denied:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:  # not a call of any of these architectures
                continue
            _check(lib.seccomp_rule_add_array(ctx, _errno(errno.EPERM), number, 0, None), name)
        clone = lib.seccomp_syscall_resolve_name(b"clone")
        for flag, bit in CLONE_NEW.items():
            # the flags are clone's first argument on every architecture listed above
            cmp = (_Cmp * 1)(_Cmp(0, SCMP_CMP_MASKED_EQ, bit, bit))
            _check(lib.seccomp_rule_add_array(ctx, _errno(errno.EPERM), clone, 1, cmp), flag)
        clone3 = lib.seccomp_syscall_resolve_name(b"clone3")
        if clone3 >= 0:
            _check(lib.seccomp_rule_add_array(ctx, _errno(errno.ENOSYS), clone3, 0, None),
                   "clone3")  # fmt: skip
        _check(lib.seccomp_export_bpf(ctx, fd), "export")
    finally:
        lib.seccomp_release(ctx)


def load(program: Path) -> None:
    """Put this process, and everything it starts, under ``program`` (with
    no_new_privs, which it needs); what tmax-enter and verifier_init do, for the host's
    own measurements (benchmarks/sandbox.py)."""
    data = program.read_bytes()
    if not data or len(data) % 8:
        raise SeccompError(f"{program}: not a seccomp program ({len(data)} bytes)")

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    prog = Program(len(data) // 8, data)
    if (
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0
    ):
        raise SeccompError(f"{program}: {os.strerror(ctypes.get_errno())}")


def filters() -> dict[str, Path]:
    """The compiled programs (toolbox name: file in the cache), keyed by this module's
    source: built once per host and reused."""
    key = hashlib.sha256(Path(__file__).read_bytes() + platform.machine().encode())
    folder = default_cache_dir() / f"seccomp-{key.hexdigest()[:16]}"
    paths = {name: folder / name for name in FILES}
    if all(path.is_file() for path in paths.values()):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    lib = _library()
    with file_lock(folder / ".lock"):
        for name, mounts in FILES.items():
            if paths[name].is_file():
                continue
            tmp = paths[name].with_name(f".{name}.{os.getpid()}")
            with open(tmp, "wb") as handle:
                _compile(lib, mounts, handle.fileno())
            size = tmp.stat().st_size
            if size == 0 or size % 8:
                raise SeccompError(f"libseccomp wrote a {size}-byte program for {name}")
            os.replace(tmp, paths[name])
    return paths
