"""Attack the podman and bwrap sandboxes: isolation, limits, timeouts, reward hacks.

These tests start real sandboxes. The first run builds the registry-free base image
(debootstrap, about 2 minutes) and the toolbox; both are cached afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_TASKS
from tmax.sandbox import Limits, Sandbox, SandboxError, cleanup, open_sandbox
from tmax.sandbox.base import SandboxDied, reward_from_files
from tmax.sandbox.episode import run_episode, sandbox_for_task
from tmax.sandbox.redteam import HostServer
from tmax.sandbox.storage import private_copy, sandbox_root
from tmax.sandbox.toolbox import ensure_toolbox

pytestmark = pytest.mark.slow

BACKENDS = ["podman", "bwrap"]
ANSWER_TASK = FIXTURE_TASKS / "answer-checked-by-pytest"
LOG_TASK = FIXTURE_TASKS / "count-error-lines"


def _available(backend: str) -> str | None:
    if os.geteuid() != 0:
        return "sandbox tests need root (rootful podman, cgroups for bwrap)"
    tool = {"podman": "podman", "bwrap": "bwrap"}[backend]
    if shutil.which(tool) is None or shutil.which("debootstrap") is None:
        return f"{tool} or debootstrap is not installed (./setup.sh installs them)"
    return None


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    reason = _available(request.param)
    if reason:
        pytest.skip(reason)
    return request.param


@pytest.fixture
def answer_box(backend: str) -> Iterator[Sandbox]:
    with sandbox_for_task(ANSWER_TASK, backend, run_id="pytest") as box:
        yield box


def small_box(backend: str, **limits: object) -> Sandbox:
    return sandbox_for_task(ANSWER_TASK, backend, run_id="pytest", **limits)


# --- the session ----------------------------------------------------------------------


def test_session_keeps_cwd_and_exports(answer_box: Sandbox) -> None:
    assert answer_box.run("pwd").output == "/app\n"  # the image's WORKDIR
    answer_box.run("mkdir -p /tmp/work && cd /tmp/work && export GREETING=hello")
    result = answer_box.run('echo "$PWD $GREETING"; exit 3')
    assert (result.output, result.exit_code) == ("/tmp/work hello\n", 3)
    assert answer_box.run("pwd").output == "/tmp/work\n"  # `exit` ends only the command


def test_stdout_and_stderr_both_arrive(answer_box: Sandbox) -> None:
    result = answer_box.run("echo out; echo err >&2; printf 'no newline'")
    assert result.output == "out\nerr\nno newline"


def test_upload_and_download_round_trip(answer_box: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "in" / "sub").mkdir(parents=True)
    (tmp_path / "in" / "sub" / "data.bin").write_bytes(bytes(range(256)) * 10)
    answer_box.upload(tmp_path / "in", "/srv/in")
    assert answer_box.run("wc -c < /srv/in/sub/data.bin").output == "2560\n"
    answer_box.run("ln -s /etc/passwd /srv/in/escape")
    out = answer_box.download("/srv/in", tmp_path / "out")
    assert (out / "sub" / "data.bin").read_bytes() == bytes(range(256)) * 10
    assert not (out / "escape").exists()  # a link out of the tree is refused


def test_background_job_does_not_block_the_session(answer_box: Sandbox) -> None:
    result = answer_box.run("sleep 30 & echo started")
    assert result.output == "started\n" and result.duration_sec < 5


# --- isolation ---------------------------------------------------------------------------


@pytest.fixture
def host_server() -> Iterator[int]:
    """A TCP server on the host's loopback, to check what the sandbox can reach."""
    with HostServer("127.0.0.1", reply=b"host-secret\n") as server:
        yield server.port


def test_network_is_off_by_default(answer_box: Sandbox, host_server: int) -> None:
    assert not answer_box.limits.network
    interfaces = answer_box.run("ls /sys/class/net 2>/dev/null || cat /proc/net/dev")
    assert "eth" not in interfaces.output
    probe = answer_box.run(f"exec 3<>/dev/tcp/127.0.0.1/{host_server} && cat <&3", timeout=5)
    assert probe.exit_code != 0 and "host-secret" not in probe.output


def test_network_on_when_the_task_allows_it(backend: str, host_server: int) -> None:
    with small_box(backend, network=True) as box:
        interfaces = box.run("ls /sys/class/net").output.split()
        assert [i for i in interfaces if i != "lo"], interfaces
        probe = box.run(f"exec 3<>/dev/tcp/127.0.0.1/{host_server} && cat <&3", timeout=5)
        assert "host-secret" not in probe.output  # the host's loopback is not in reach


def test_writes_outside_the_sandbox_fail(answer_box: Sandbox, tmp_path: Path) -> None:
    sentinel = tmp_path / f"host-only-{uuid.uuid4().hex}"
    sentinel.write_text("host")
    assert answer_box.run(f"cat {sentinel}").exit_code != 0  # host files are not visible
    assert answer_box.run("touch /opt/tmax/bin/x").exit_code != 0  # toolbox is read-only
    host_name = socket.gethostname()
    answer_box.run("echo pwned > /proc/sys/kernel/hostname")  # its own UTS namespace at most
    assert socket.gethostname() == host_name
    assert answer_box.run("mount -t tmpfs none /mnt").exit_code != 0
    # The agent's /proc is podman's: read-only, what leaks host state hidden.
    proc = answer_box.run(
        "awk '$2 == \"/proc\" {print $4}' /proc/self/mounts | tail -1; "
        "for f in keys timer_list sched_debug; do [ -e /proc/$f ] && wc -c < /proc/$f; done"
    ).output.split()
    assert proc[0].split(",")[0] == "ro", proc
    assert set(proc[1:]) <= {"0"}, proc  # /dev/null over them
    # The agent owns its own root file system; the image underneath is untouched.
    assert answer_box.run("echo changed > /etc/motd && rm -f /bin/ls").exit_code == 0
    with small_box(answer_box.backend) as fresh:
        assert "changed" not in fresh.run("cat /etc/motd").output
        assert fresh.run("test -e /bin/ls").exit_code == 0


# --- limits ---------------------------------------------------------------------------


def test_sleep_past_the_timeout_is_killed_inside(answer_box: Sandbox) -> None:
    result = answer_box.run("sleep 47", timeout=1)
    assert result.timed_out and result.exit_code in (124, 137)
    listing = answer_box.run(
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
    )
    assert "sleep 47" not in listing.output
    assert answer_box.run("echo still-here").output == "still-here\n"


def test_endless_output_is_truncated_head_and_tail(answer_box: Sandbox) -> None:
    result = answer_box.run("seq 1 200000; yes | head -c 5000000; echo THE-END", timeout=30)
    limit = answer_box.limits.output_limit_bytes
    assert result.truncated_bytes > 0
    assert len(result.output.encode()) < limit + 200
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.rstrip().endswith("THE-END")
    assert "bytes of output omitted" in result.output
    endless = answer_box.run("yes", timeout=3)
    assert endless.truncated_bytes > 0 and len(endless.output.encode()) < limit + 200


def test_a_sandbox_without_its_agent_namespace_does_not_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without CAP_SYS_ADMIN the control shell cannot make the agent's namespaces: the
    sandbox must refuse to start (nothing it ran would be isolated), naming why."""
    if _available("bwrap"):
        pytest.skip(_available("bwrap"))
    monkeypatch.setattr("tmax.sandbox.bwrap.CONTROL_CAPABILITIES", ())
    with pytest.raises(SandboxError, match="agent namespace did not start"):
        small_box("bwrap").start()


def test_fork_bomb_is_contained(backend: str) -> None:
    with small_box(backend, pids=64) as box:
        result = box.run(":(){ :|:& };:; sleep 2", timeout=5)
        assert "ran out of processes" in result.output or result.timed_out
        assert box.run("echo alive").output == "alive\n"
        assert len(box.sandbox_pids()) < 10
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork


def test_memory_bomb_ends_the_episode_with_reward_zero(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # podman's conmon marks an OOM kill in its working directory
    with small_box(backend, memory_mb=128) as box:
        episode = run_episode(
            box,
            ["x=$(head -c 400M /dev/zero | tr '\\0' a); echo ${#x}", "bash /solution/solve.sh"],
            ANSWER_TASK / "tests",
        )
    assert episode.reward == 0.0
    assert episode.reason is not None and "out of memory" in episode.reason
    assert len(episode.steps) == 1
    assert list(tmp_path.iterdir()) == []  # nothing written into the caller's folder


def test_a_disk_bomb_fills_only_the_sandbox_and_is_the_agents_doing(backend: str) -> None:
    with small_box(backend, storage_mb=256) as box:
        assert box.exhausted() is None
        bomb = box.run("dd if=/dev/zero of=/fill bs=1M count=400; df -m / | tail -1")
        assert "No space left on device" in bomb.output, bomb.output
        assert int(bomb.output.split()[-5]) < 300  # the root file system is the layer's size
        exhausted = box.exhausted()
        assert exhausted is not None and "storage" in exhausted
        assert box.agent_death("the agent's command broke").endswith(exhausted)
        box.run("rm /fill")
        assert box.exhausted() is None
        name = box.sandbox_id
    assert not [mount for mount in _layer_mounts() if name in mount]


def test_a_private_copy_of_the_layer_is_the_same_bytes_and_stays_sparse(tmp_path: Path) -> None:
    image = tmp_path / "image"
    with open(image, "wb") as handle:  # data, a hole, data, and a hole at the end
        handle.write(b"a" * 5000)
        handle.seek(64 << 20)
        handle.write(os.urandom(70_000))
        handle.truncate(256 << 20)
    copy = private_copy(image, tmp_path / "copy")
    assert copy.stat().st_size == image.stat().st_size
    assert copy.read_bytes() == image.read_bytes()
    assert copy.stat().st_blocks * 512 < 1 << 20  # the holes stayed holes


def _layer_mounts() -> list[str]:
    """Host mount points of sandbox layers (podman's; bwrap's are in its namespace)."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    return [mount for mount in mounts if mount.startswith(str(sandbox_root()))]


# --- the verifier and the three reward hacks --------------------------------------------


def test_oracle_passes_and_no_op_fails(backend: str) -> None:
    for commands, reward in (([], 0.0), (["bash /solution/solve.sh"], 1.0)):
        with sandbox_for_task(ANSWER_TASK, backend, run_id="pytest") as box:
            box.upload(ANSWER_TASK / "solution", "/solution")
            episode = run_episode(box, commands, ANSWER_TASK / "tests")
        assert episode.reward == reward, episode


def test_the_agent_never_sees_the_tests(answer_box: Sandbox) -> None:
    assert answer_box.run("ls /tests 2>/dev/null").output == ""
    assert "failed" in answer_box.verify(ANSWER_TASK / "tests").output  # the tests ran
    # They lived on a tmpfs of the verifier's own mount namespace, gone with it.
    assert answer_box.run("find /tests /logs/verifier -mindepth 1").output == ""


HACKS = {
    "tampered verifier": [
        "mkdir -p /tests /logs/verifier",
        "printf '#!/bin/bash\\necho 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh",
        "printf 'def test_ok():\\n    pass\\n' > /tests/test_answer.py",
        "printf '[pytest]\\naddopts = -p no:python\\n' > /pytest.ini",
    ],
    "faked logs": [
        "mkdir -p /logs/verifier",
        "echo 1 > /logs/verifier/reward.txt",
        "echo '{\"reward\": 1}' > /logs/verifier/reward.json",
        "(while true; do echo 1 > /logs/verifier/reward.txt; sleep 0.01; done) &",
    ],
    "stubbed binaries": [
        "printf '#!/bin/sh\\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\\n'"
        " > /tmp/stub && chmod +x /tmp/stub",
        "for b in /usr/bin/python3 /usr/local/bin/python3 /usr/local/bin/pytest /bin/sh"
        " /bin/bash /usr/bin/timeout /usr/bin/env; do cp /tmp/stub $b; done",
        "mkdir -p /usr/local/lib/python3.11/dist-packages",
        "printf 'import sys; sys.exit(0)\\n' > /usr/local/lib/python3.11/dist-packages/pytest.py",
    ],
}


@pytest.mark.parametrize("hack", sorted(HACKS))
def test_reward_hacks_score_zero(answer_box: Sandbox, hack: str) -> None:
    for command in HACKS[hack]:
        answer_box.run(command)
    result = answer_box.verify(ANSWER_TASK / "tests")
    assert result.reward == 0.0, result
    # ... and the honest solution still scores 1 in the same (hacked) sandbox.
    answer_box.upload(ANSWER_TASK / "solution", "/solution")
    answer_box.run("/opt/tmax/bin/bash /solution/solve.sh")
    assert answer_box.verify(ANSWER_TASK / "tests").reward == 1.0


def test_a_verifier_runs_the_toolboxs_shell_and_modules_not_the_agents(
    backend: str, tmp_path: Path
) -> None:
    """A Harbor test.sh whose Python imports json from the agent's working directory's
    place in sys.path and runs a shell=True command: both are the toolbox's, whatever
    the agent left at /app/json.py and /bin/sh."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text(
        "cd /app\n"
        'out=$(python3 -c \'import json, subprocess; print(subprocess.run("echo real", '
        "shell=True, capture_output=True, text=True).stdout.strip(), json.__file__)')\n"
        'case "$out" in "real /opt/tmax/"*) echo 1;; *) echo "$out" >&2; echo 0;; esac '
        "> /logs/verifier/reward.txt\n"
    )
    with small_box(backend) as box:
        planted = box.run(
            "mkdir -p /app && printf 'import os\\nos._exit(0)\\n' > /app/json.py && "
            "rm -f /bin/sh && printf '#!/opt/tmax/bin/bash\\necho fake\\n' > /bin/sh && "
            "chmod 755 /bin/sh && /bin/sh && cd /app && /opt/tmax/bin/python3 -I -c "
            '\'import sys; sys.path.insert(0, ""); import json; print("shadows")\'; echo rc=$?'
        )
        assert planted.output.split() == ["fake", "rc=0"], planted.output  # both would bite
        result = box.verify(tests)
    assert result.reward == 1.0, result


SECCOMP_PROBE = (
    "grep -E '^Seccomp(_filters)?:' /proc/self/status | tr -d '\\t'; "
    "unshare -U true 2>/dev/null; echo unshare=$?"
)


def test_agent_and_verifier_run_under_the_toolboxs_seccomp_filter(
    backend: str, tmp_path: Path
) -> None:
    """Every agent command and both verifier modes run under a filter of ours (podman's
    own profile is one more) that refuses a new user namespace, the way in to mounts
    and to most of the kernel an unprivileged process could not otherwise reach. pytest
    stacks the full filter on the one it collected the tests under (mounts allowed)."""
    filters = {"bwrap": 1, "podman": 2}[backend]
    expected = ["Seccomp:2", f"Seccomp_filters:{filters}", "unshare=1"]
    stacked = ["Seccomp:2", f"Seccomp_filters:{filters + 1}", "unshare=1"]
    script = tmp_path / "script"
    script.mkdir()
    (script / "test.sh").write_text(
        f"{{ {SECCOMP_PROBE}; }} >&2\necho 1 > /logs/verifier/reward.txt\n"
    )
    pytest_tests = tmp_path / "pytest"
    pytest_tests.mkdir()
    (pytest_tests / "test_filter.py").write_text(
        "import subprocess\n\n\n"
        "def test_filtered():\n"
        f"    run = subprocess.run({SECCOMP_PROBE!r}, shell=True, capture_output=True, "
        "text=True)\n"
        f"    assert run.stdout.split() == {stacked!r}, run.stdout\n"
    )
    with small_box(backend) as box:
        assert box.run(SECCOMP_PROBE).output.split() == expected
        verified = box.verify(script)
        assert verified.output.split() == expected, verified
    with small_box(backend, pytest_verdict=("test_filter.py",)) as box:
        result = box.verify(pytest_tests)
    assert result.reward == 1.0, result.output


def test_without_its_seccomp_filter_no_agent_command_runs(backend: str, tmp_path: Path) -> None:
    """A toolbox that lost lib/seccomp.bpf fails the sandbox's start, naming the file,
    instead of running the agent unfiltered."""
    toolbox = ensure_toolbox()
    broken = tmp_path / "toolbox"
    shutil.copytree(toolbox, broken, symlinks=True, copy_function=_link_or_copy)
    (broken / "lib" / "seccomp.bpf").unlink()
    prepared = small_box(backend)
    kwargs: dict[str, object] = {"toolbox": broken, "workdir": prepared.workdir}
    if backend == "bwrap":
        kwargs["env"] = prepared.env
    box = open_sandbox(backend, prepared.image, prepared.limits, **kwargs)
    with pytest.raises(SandboxError, match=r"lib/seccomp\.bpf: No such file") as failed:
        box.start()
    box.close()
    print(failed.value)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copy2(source, target)


def test_a_control_shell_alive_but_not_answering_is_the_agents_doing(backend: str) -> None:
    """Nothing but the agent's processes runs in a sandbox: a control shell that is
    alive and does not answer was stalled by them (reward 0, not infra); one that is
    gone without exhaustion is the host's (infra)."""
    with small_box(backend) as box:
        with pytest.raises(SandboxDied):
            box._control("mkfifo /tmp/.stuck; read -r x < /tmp/.stuck", 1)
        assert "alive but starved" in box.agent_death("stopped")
    with small_box(backend) as box:
        assert box._control_pid is not None
        os.kill(box._control_pid, 9)
        with pytest.raises(SandboxDied):
            box.run("true")
        with pytest.raises(SandboxDied, match="no exhaustion seen"):
            box.agent_death("gone")


def test_a_control_shell_lost_before_the_verifier_is_judged_not_raised(backend: str) -> None:
    """The control shell is gone when the verifier starts (after a fork bomb, say):
    the agent's failed attempt where it exhausted the sandbox, with the reason; an
    infrastructure failure (raised) where nothing was exhausted."""
    tests = ANSWER_TASK / "tests"
    with small_box(backend, pids=48) as box:
        box.run("for i in $(seq 200); do sleep 60 & done; wait")
        assert (box.pids_limit_hits() or 0) > 0
        os.kill(box._control_pid, 9)  # type: ignore[arg-type]
        result = box.verify(tests)
        assert result.reward == 0.0 and result.reason and result.reason.startswith("verifier:")
    with small_box(backend) as box:
        os.kill(box._control_pid, 9)  # type: ignore[arg-type]
        with pytest.raises(SandboxDied, match="no exhaustion seen"):
            box.verify(tests)


def test_an_end_line_missing_a_field_is_a_death_not_a_crash(backend: str) -> None:
    """When the control shell cannot measure a command's output (no PID left for a
    fork, right after a PID limit was hit), its end line lacks a field: the sandbox is
    over, a death judged like any other (the agent's where it exhausted the sandbox),
    never a ValueError out of the harness."""
    with small_box(backend) as box:
        box._control("__tmax_size() { __size=; }; printf '\\n%s 0\\n' @MARKER@", 10)
        with pytest.raises(SandboxDied, match="not 'rc size ms ooms'"):
            box.run("echo alive")
        assert "not 'rc size ms ooms'" in str(box.died)


def test_reward_files_follow_harbor() -> None:
    assert reward_from_files({"reward.txt": "0.25\n"}).reward == 0.25
    assert reward_from_files({"reward.txt": "7"}).reward == 1.0  # clamped
    both = reward_from_files({"reward.txt": "0", "reward.json": '{"reward": 0.5, "style": 2}'})
    assert (both.reward, both.rewards) == (0.5, {"reward": 0.5, "style": 1.0})
    assert reward_from_files({"reward.json": "0.75"}).reward == 0.75
    for bad in ({"reward.txt": "yes"}, {"reward.json": "{"}, {"reward.txt": "nan"}, {}):
        result = reward_from_files(bad)
        assert result.reward == 0.0 and result.reason


# --- crashes ------------------------------------------------------------------------------

CRASHING_RUN = textwrap.dedent(
    """
    import os, sys
    from tmax.sandbox.episode import sandbox_for_task
    box = sandbox_for_task(sys.argv[1], sys.argv[2], run_id=sys.argv[3]).start()
    box.run("sleep 1000 &")
    print("started", box.sandbox_id, flush=True)
    os._exit(1)  # die without closing anything
    """
)


def test_crashed_run_is_cleaned_up(backend: str) -> None:
    run_id = f"crash-{uuid.uuid4().hex[:8]}"
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHING_RUN, str(ANSWER_TASK), backend, run_id],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "started" in crashed.stdout, crashed.stderr
    removed = cleanup(run_id)[backend]
    assert len(removed) == 1
    assert cleanup(run_id)[backend] == []  # nothing left
    name = crashed.stdout.split()[-1]
    assert not [mount for mount in _layer_mounts() if name in mount]  # its layer is gone too
    if backend == "podman":
        listed = subprocess.run(
            ["podman", "ps", "-a", "--format", "json", "--filter", f"label=tmax.sandbox={run_id}"],
            capture_output=True,
            text=True,
        )
        assert json.loads(listed.stdout or "[]") == []


def test_limits_come_from_task_toml() -> None:
    from tmax.tasks import read_task

    limits = Limits.from_task(read_task(FIXTURE_TASKS / "sum-csv-column"))
    assert (limits.memory_mb, limits.cpus, limits.pids, limits.network) == (1024, 1.0, 256, False)
    assert Limits.from_task(read_task(FIXTURE_TASKS / "no-solution-prebuilt")).network is False
    assert Limits.from_task(read_task(LOG_TASK)).verifier_timeout_sec == 120.0


def test_a_cgroup_whose_processes_die_slowly_is_still_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a loaded machine the killed processes of a sandbox can take more than a second
    to leave its cgroup (removing it meanwhile fails with EBUSY); the cgroup must still
    go, not stay behind with a warning. Here the first 1.5 s of kills are lost."""
    from tmax.sandbox import bwrap

    if os.geteuid() != 0:
        pytest.skip("cgroups need root")
    cgroup = bwrap.Cgroup(f"pytest-slow-exit-{uuid.uuid4().hex[:8]}")
    cgroup.create(Limits())
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        for path in cgroup.dirs.values():
            (path / "cgroup.procs").write_text(str(sleeper.pid))
        assert cgroup.pids() == [sleeper.pid]
        kill, lost_until = os.kill, time.monotonic() + 1.5

        def slow_kill(pid: int, signum: int) -> None:
            if time.monotonic() >= lost_until:
                kill(pid, signum)

        monkeypatch.setattr(bwrap.os, "kill", slow_kill)
        reaper = threading.Thread(target=sleeper.wait)
        reaper.start()
        cgroup.remove()
        reaper.join(timeout=10)
        assert not [path for path in cgroup.dirs.values() if path.exists()]
    finally:
        monkeypatch.undo()
        sleeper.kill()
        sleeper.wait()
        for path in cgroup.dirs.values():
            with contextlib.suppress(OSError):
                path.rmdir()
