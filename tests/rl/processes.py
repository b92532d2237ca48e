"""Processes seen from /proc: what fault-injection tests kill and check for."""

from __future__ import annotations

from pathlib import Path


def running(pid: int) -> bool:
    """Alive and not a zombie (the test process reaps its children only later)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def children(pid: int) -> set[int]:
    """Every live descendant of ``pid``."""
    parents: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                parents[int(proc.name)] = int(
                    (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
                )
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return {p for p in found if running(p)}


def server_processes(supervisor: int) -> tuple[set[int], set[int]]:
    """The vLLM API server under a supervisor, and its engine core and workers."""

    def command(pid: int) -> bytes:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return b""

    below = children(supervisor)
    api = {p for p in below if b"vllm.entrypoints" in command(p)}
    return api, below - api


def processes_naming(text: str) -> set[int]:
    """Live processes whose command line contains ``text``."""
    found = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if text.encode() in command and running(int(proc.name)):
                found.add(int(proc.name))
    return found
