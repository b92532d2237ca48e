"""The Apptainer backend against a fake ``singularity`` (Apptainer is not installable here).

The fake records every call as a JSON line, keeps instances in a state file and
follows Apptainer's documented behaviour where our backend depends on it:

- ``instance start`` starts a real process (the instance's init) whose PID
  ``instance list --json`` reports, as Apptainer does; ``instance stop`` kills it.
- Without ``--fakeroot`` the sandbox user is an ordinary user (uid 1000); with it,
  root inside a user namespace ("User namespaces and fakeroot" in the admin docs).
- ``--memory``/``--cpus``/``--pids-limit`` fail the start with Apptainer's message
  ("while applying cgroups config") where ``$FAKE_APPTAINER_CGROUPS=fail``: a user
  without cgroups v2 delegation ("Limiting container resources with cgroups").
- ``overlay create --sparse --size N FILE`` makes a sparse ext3 image of N MiB holding
  ``upper`` and ``work`` (cmd/internal/cli/overlay_create_linux.go: ``mkfs.ext3 -d``);
  ``$FAKE_APPTAINER_OVERLAY=fail`` makes it fail as on a host without mkfs.ext3/fuse2fs.
- The writable layer is the ``--overlay`` image (its own file system: a full layer is
  ENOSPC at its size) or directory; without one it is the session directory, a tmpfs
  capped at 64 MiB ("sessiondir max size" in apptainer.conf).
- ``exec instance://NAME`` runs the command under bubblewrap on the host's root file
  system under that writable layer (so nothing reaches the host's files), with the
  toolbox bound at /opt/tmax, in a user namespace, with no capabilities as the
  ordinary user: the inside of the "container" is the host's software, but base.py's
  control protocol, the agent's own namespaces included, runs end to end through the
  backend. Needs root (the mounts), as the rest of the sandbox suite does.
- ``$FAKE_APPTAINER_PIDNS=no`` leaves the node's PID namespace shared, as
  ``allow pid ns = no`` in apptainer.conf does.
- ``build`` writes the definition into the output (no image is built).
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tmax.sandbox import apptainer, seccomp
from tmax.sandbox.apptainer import (
    ApptainerSandbox,
    build_sif,
    cgroup_problem,
    dockerfile_to_definition,
    instance_name,
    run_prefix,
)
from tmax.sandbox.base import Limits, Sandbox, SandboxError
from tmax.sandbox.episode import sandbox_for_task
from tmax.sandbox.images import ImageError
from tmax.sandbox.preflight import preflight, table
from tmax.sandbox.redteam import family_task
from tmax.sandbox.storage import sandbox_root
from tmax.sandbox.toolbox import enter_binary

FIXTURES = Path(__file__).parents[1] / "fixtures"
needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0,
    reason="the fake's instances need bwrap and root (overlay mounts)",
)

TOOLS = [
    *("bash", "sh", "cat", "head", "tail", "timeout", "env", "mkdir", "chmod", "rm", "stat"),
    *("date", "tee", "wc", "awk", "sed", "tr", "sleep", "tar", "base64", "printf", "ls", "cp"),
    *("mv", "touch", "id", "pwd", "echo", "true", "false", "grep", "sort", "cut", "dirname"),
    *("unshare", "setpriv", "mount", "find"),
]

FAKE = r"""#!@PYTHON@
import json, os, shlex, signal, subprocess, sys

LOG, STATE = @LOG@, @STATE@
argv = sys.argv[1:]
with open(LOG, "a") as log:
    log.write(json.dumps({"argv": argv, "cwd": os.getcwd()}) + "\n")


def load():
    try:
        with open(STATE) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {}


def save(state):
    with open(STATE, "w") as handle:
        json.dump(state, handle)


def fatal(message):
    print("FATAL:   " + message, file=sys.stderr)
    sys.exit(255)


args = [a for a in argv if a not in ("--quiet", "-q", "--debug", "-d", "--silent", "-s")]
if args in (["--version"], ["version"]):
    print("apptainer version 1.3.4")
    sys.exit(0)
state = load()
if args[:2] == ["instance", "start"]:
    options, (image, name) = args[2:-2], args[-2:]
    if name in state:
        fatal(f"instance {name} already exists")
    limited = {"--memory", "--cpus", "--pids-limit"} & set(options)
    if limited and os.environ.get("FAKE_APPTAINER_CGROUPS") == "fail":
        fatal("container creation failed: while applying cgroups config: "
              "rootless cgroups require a D-Bus session")
    binds = [options[i + 1] for i, o in enumerate(options) if o == "--bind"]
    toolbox = next(b.split(":")[0] for b in binds if b.split(":")[1] == "/opt/tmax")
    init = subprocess.Popen(["sleep", "infinity"], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    state[name] = {"image": image, "toolbox": toolbox, "options": options, "pid": init.pid}
    save(state)
elif args[:2] == ["instance", "list"]:
    listed = [
        {"instance": n, "pid": s.get("pid", 0), "img": s["image"], "ip": "",
         "logErrPath": "", "logOutPath": ""}
        for n, s in state.items()
    ]
    print(json.dumps({"instances": listed}, indent=4))
elif args[:2] == ["instance", "stop"]:
    name = args[-1]
    if name not in state:
        fatal(f"no instance found with name {name}")
    if state[name].get("pid"):
        try:
            os.kill(state[name]["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
    del state[name]
    save(state)
elif args[:2] == ["overlay", "create"]:
    if os.environ.get("FAKE_APPTAINER_OVERLAY") == "fail":
        fatal("mkfs.ext3 not found in PATH")
    size, path = int(args[args.index("--size") + 1]), args[-1]
    with open(path, "wb") as handle:
        handle.truncate(size * 1024 * 1024)
    seed = subprocess.run(["mktemp", "-d"], capture_output=True, text=True).stdout.strip()
    os.mkdir(seed + "/upper")
    os.mkdir(seed + "/work")
    made = subprocess.run(["mkfs.ext3", "-q", "-F", "-d", seed, path], capture_output=True,
                          text=True)
    subprocess.run(["rm", "-rf", seed])
    if made.returncode != 0:
        fatal("while creating overlay image: " + made.stderr.strip())
elif args[:1] == ["exec"]:
    target = next(a for a in args if a.startswith("instance://"))
    instance = state.get(target.removeprefix("instance://")) or fatal(f"no instance {target}")
    command = args[args.index(target) + 1:]
    envs = [args[i + 1] for i, a in enumerate(args[:args.index(target)]) if a == "--env"]
    user = ["--uid", "0", "--gid", "0"] if "--fakeroot" in instance["options"] else [
        "--uid", "1000", "--gid", "1000", "--cap-drop", "ALL"]
    setenv = [x for e in envs for x in ("--setenv", *e.split("=", 1))]
    # The instance's file system: the host's root under a writable layer on a tmpfs,
    # in a private mount namespace (never the host's own files).
    # allow pid ns = no (apptainer.conf): the instance shares the node's PID namespace
    unshare = ["--unshare-all"] if os.environ.get("FAKE_APPTAINER_PIDNS") != "no" else [
        "--unshare-user", "--unshare-ipc", "--unshare-net", "--unshare-uts", "--unshare-cgroup"]
    bwrap = shlex.join([
        "bwrap", "--bind", "$M", "/", "--tmpfs", "/opt", "--tmpfs", "/tmp",
        "--ro-bind", instance["toolbox"], "/opt/tmax", "--dev", "/dev", "--proc", "/proc",
        *unshare, *user, *setenv, "--die-with-parent", *command,
    ]).replace("'$M'", '"$M"')
    options = instance["options"]
    overlay = options[options.index("--overlay") + 1] if "--overlay" in options else None
    if overlay and os.path.isfile(overlay):  # an overlay image: its file system, its size
        upper = f"mount -o loop,nosuid,nodev {shlex.quote(overlay)} \"$L\" && U=$L/upper W=$L/work"
    elif overlay:  # a directory on the host's disk holds the layer
        upper = f"U={shlex.quote(overlay)}/upper W={shlex.quote(overlay)}/work && mkdir -p $U $W"
    else:  # the session directory: a tmpfs of "sessiondir max size" (apptainer.conf)
        upper = 'mount -t tmpfs -o size=64m tmpfs "$L" && U=$L/upper W=$L/work && mkdir $U $W'
    layer = (
        f'L=$(mktemp -d) && {upper} && M=$(mktemp -d) && '
        'mount -t overlay overlay -o "lowerdir=/,upperdir=$U,workdir=$W" "$M" && '
        f"exec {bwrap}"
    )
    os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", "sh", "-c", layer])
elif args[:1] == ["build"]:
    output, definition = args[-2:]
    with open(definition) as src, open(output, "w") as dst:
        dst.write("SIF " + src.read())
else:
    fatal(f"fake singularity does not know {args}")
"""


class Fake:
    """Handle on the fake binary: its call log and its instance state."""

    def __init__(self, root: Path) -> None:
        self.bin_dir = root / "fake-bin"
        self.log = root / "calls.jsonl"
        self.state = root / "instances.json"
        self.bin_dir.mkdir()
        script = (
            FAKE.replace("@PYTHON@", sys.executable)
            .replace("@LOG@", repr(str(self.log)))
            .replace("@STATE@", repr(str(self.state)))
        )
        path = self.bin_dir / "singularity"
        path.write_text(script)
        path.chmod(0o755)

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line)["argv"] for line in self.log.read_text().splitlines()]

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def instances(self) -> dict[str, Any]:
        return json.loads(self.state.read_text()) if self.state.exists() else {}

    def start_instance(self, name: str) -> None:
        subprocess.run(
            ["singularity", "instance", "start", "--bind", "/x:/opt/tmax:ro", "/x.sif", name],
            check=True,
        )


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fake]:
    handle = Fake(tmp_path)
    monkeypatch.setenv("PATH", f"{handle.bin_dir}{os.pathsep}{os.environ['PATH']}")
    # the fake's overlay images and layers stay in the test's own directory
    monkeypatch.setenv("TMAX_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    monkeypatch.setattr(apptainer, "_overlay_templates", {})
    monkeypatch.delenv("TMAX_APPTAINER_BIN", raising=False)
    yield handle
    for name in handle.instances():  # what a test started itself ("someone else's")
        subprocess.run(["singularity", "instance", "stop", name], check=False)


@pytest.fixture
def toolbox(tmp_path: Path) -> Path:
    """A stand-in toolbox: bin/<tool> links to the tools of whatever root it is seen from."""
    root = tmp_path / "toolbox"
    (root / "bin").mkdir(parents=True)
    for tool in TOOLS:
        found = shutil.which(tool, path="/usr/bin:/bin")
        if found:
            (root / "bin" / tool).symlink_to(found)
    (root / "bin" / "tmax-enter").symlink_to(enter_binary())
    (root / "lib").mkdir()
    for name, program in seccomp.filters().items():  # read with O_NOFOLLOW: copies
        shutil.copy(program, root / "lib" / name)
    return root


def start_args(sandbox: ApptainerSandbox, fake: Fake) -> list[str]:
    """Run only the backend's ``_start`` and return the ``instance start`` argv."""
    process = sandbox._start()
    assert process.stdin is not None and process.stdout is not None
    process.stdin.close()  # the control shell (or a failed exec) ends at EOF
    process.wait(timeout=60)
    process.stdout.close()
    sandbox._stop()
    return [c for c in fake.calls() if c[1:3] == ["instance", "start"]][-1]  # the last try


def test_instance_start_options(fake: Fake, toolbox: Path) -> None:
    limits = Limits(memory_mb=1536, cpus=1.5, pids=256, network=False)
    sandbox = ApptainerSandbox("/images/task.sif", limits, toolbox=toolbox, run_id="r1")
    argv = start_args(sandbox, fake)
    name = sandbox.sandbox_id
    assert name.startswith(run_prefix("r1")) and name.startswith("tmax.sandbox-r1-")
    assert argv[:3] == ["--quiet", "instance", "start"]
    assert argv[-2:] == ["/images/task.sif", name]
    options = argv[3:-2]
    assert "--containall" in options and "--no-nv" in options
    assert "--writable-tmpfs" not in options  # 64 MiB of memory, full without a message
    assert options[options.index("--bind") + 1] == f"{toolbox}:/opt/tmax:ro"
    layer = sandbox_root() / "apptainer" / name
    assert options[options.index("--overlay") + 1] == str(layer / "overlay.img")
    assert options[options.index("--workdir") + 1] == str(layer / "work")
    joined = " ".join(options)
    assert "--net --network none" in joined
    assert "--memory 1536M --memory-swap 1536M" in joined and "--cpus 1.5" in joined
    assert "--pids-limit 256" in joined
    assert "--fakeroot" not in options  # root needs none
    assert sandbox.degraded == []
    assert not layer.exists()  # the writable layer goes with the sandbox
    exec_call = next(c for c in fake.calls() if c[0] == "exec")
    assert exec_call == [
        "exec",
        "--cleanenv",
        f"instance://{name}",
        "/opt/tmax/bin/bash",
        "--noprofile",
        "--norc",
    ]
    assert fake.calls()[-1] == ["--quiet", "instance", "stop", name]
    assert fake.instances() == {}


def test_network_and_fakeroot_flags(fake: Fake, toolbox: Path) -> None:
    limits = Limits(network=True)
    image = "docker://debian:bookworm-slim"
    sandbox = ApptainerSandbox(image, limits, toolbox=toolbox, fakeroot=True)
    options = start_args(sandbox, fake)[3:-2]
    assert " ".join(options).count("--net --network none") == 1  # pasta's, once up
    assert "--fakeroot" in options
    assert sandbox.sandbox_id.startswith(run_prefix(os.environ.get("TMAX_RUN_ID", "default")))


def test_a_user_without_root_gets_fakeroot_and_limits_that_degrade(
    fake: Fake, toolbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)  # a batch job's environment
    problem = cgroup_problem()
    assert problem is not None
    sandbox = ApptainerSandbox("/x.sif", Limits(memory_mb=512), toolbox=toolbox)
    options = start_args(sandbox, fake)[3:-2]
    assert "--fakeroot" in options  # else root-owned image files are read-only to us
    assert "--memory" not in options and "--pids-limit" not in options
    assert sandbox.degraded == [f"memory/CPU/PID limits: {problem}"]
    monkeypatch.setenv("TMAX_SANDBOX_LIMITS", "require")
    with pytest.raises(SandboxError, match="delegate cgroups v2"):
        ApptainerSandbox("/x.sif", toolbox=toolbox).start()
    assert ApptainerSandbox("/x.sif", toolbox=toolbox, fakeroot=False).fakeroot is False


def test_cgroup_problem_names_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cgroup_problem(uid=0, root=tmp_path) is None
    assert "cgroups v1" in str(cgroup_problem(uid=1000, root=tmp_path))
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert "DBUS_SESSION_BUS_ADDRESS unset" in str(cgroup_problem(uid=1000, root=tmp_path))
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus")
    assert "no delegated cgroup" in str(cgroup_problem(uid=1000, root=tmp_path))
    service = tmp_path / "user.slice" / "user-1000.slice" / "user@1000.service"
    service.mkdir(parents=True)
    (service / "cgroup.controllers").write_text("cpu pids\n")
    assert cgroup_problem(uid=1000, root=tmp_path) == (
        "controllers not delegated to the user: memory"
    )
    (service / "cgroup.controllers").write_text("cpu memory pids\n")
    assert cgroup_problem(uid=1000, root=tmp_path) is None


def test_a_start_that_fails_on_cgroups_is_retried_without_them_under_best_effort(
    fake: Fake, toolbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_APPTAINER_CGROUPS", "fail")
    sandbox = ApptainerSandbox("/x.sif", toolbox=toolbox)
    options = start_args(sandbox, fake)[3:-2]
    assert "--memory" not in options
    (degraded,) = sandbox.degraded
    assert "while applying cgroups config" in degraded
    monkeypatch.setenv("TMAX_SANDBOX_LIMITS", "require")
    with pytest.raises(SandboxError, match="cgroups v2 delegated"):
        ApptainerSandbox("/x.sif", toolbox=toolbox).start()
    monkeypatch.setenv("TMAX_SANDBOX_LIMITS", "off")
    off = ApptainerSandbox("/x.sif", toolbox=toolbox)
    assert "--memory" not in start_args(off, fake) and off.degraded == []
    monkeypatch.setenv("TMAX_SANDBOX_LIMITS", "sometimes")
    with pytest.raises(SandboxError, match="require, best_effort, off"):
        ApptainerSandbox("/x.sif", toolbox=toolbox).start()


def test_without_overlay_images_the_layer_is_a_directory_and_says_so(
    fake: Fake, toolbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_APPTAINER_OVERLAY", "fail")
    sandbox = ApptainerSandbox("/x.sif", Limits(storage_mb=77), toolbox=toolbox)
    options = start_args(sandbox, fake)[3:-2]
    assert options[options.index("--overlay") + 1].endswith("/overlay")
    assert sandbox.degraded == ["storage: a directory overlay (overlay images unavailable)"]


@pytest.mark.slow
@needs_bwrap
def test_the_writable_layer_is_the_overlay_image_not_the_64_mib_session(
    fake: Fake, toolbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write = "head -c 200M /dev/zero > /big; echo rc=$?; rm -f /big"
    with ApptainerSandbox("/x.sif", Limits(storage_mb=300), toolbox=toolbox) as box:
        assert "rc=0" in box.run(write).output  # what preflight probes for
        bomb = box.run("head -c 400M /dev/zero > /big; echo rc=$?").output
        assert "No space left on device" in bomb and "rc=1" in bomb, bomb  # at its size
    # Without the overlay, Apptainer's writable space is the session's 64 MiB.
    with_overlay = ApptainerSandbox._start_args

    def without_overlay(self: ApptainerSandbox, cgroup_limits: bool = True) -> list[str]:
        args = with_overlay(self, cgroup_limits)
        at = args.index("--overlay")
        return args[:at] + args[at + 2 :]

    monkeypatch.setattr(ApptainerSandbox, "_start_args", without_overlay)
    with ApptainerSandbox("/x.sif", Limits(storage_mb=300), toolbox=toolbox) as box:
        assert "No space left on device" in box.run(write).output


def test_binary_override(fake: Fake, toolbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (fake.bin_dir / "singularity").rename(fake.bin_dir / "my-apptainer")
    monkeypatch.setenv("TMAX_APPTAINER_BIN", "my-apptainer")
    sandbox = ApptainerSandbox("/x.sif", toolbox=toolbox)
    assert start_args(sandbox, fake)[1:3] == ["instance", "start"]
    assert ApptainerSandbox.cleanup() == []


def test_failed_start_raises_with_the_message(fake: Fake, toolbox: Path) -> None:
    sandbox = ApptainerSandbox("/x.sif", toolbox=toolbox)
    fake.start_instance(sandbox.sandbox_id)  # the fake refuses a second instance of a name
    with pytest.raises(SandboxError, match="already exists"):
        sandbox.start()


@pytest.fixture
def sandbox(fake: Fake, toolbox: Path) -> Iterator[ApptainerSandbox]:
    with ApptainerSandbox("/images/task.sif", toolbox=toolbox, run_id="live") as started:
        yield started


@pytest.mark.slow
@needs_bwrap
def test_control_shell_runs_commands(sandbox: ApptainerSandbox, fake: Fake) -> None:
    result = sandbox.run("echo hi")
    assert (result.output, result.exit_code, result.timed_out) == ("hi\n", 0, False)
    assert sandbox.run("exit 3").exit_code == 3
    sandbox.run("cd /tmp && export GREETING=hello")
    assert sandbox.run("pwd").output == "/tmp\n"
    assert sandbox.run('echo "$GREETING"').output == "hello\n"
    assert sandbox.run("sleep 5", timeout=1).timed_out


@pytest.mark.slow
@needs_bwrap
def test_the_instance_pid_anchors_the_hosts_view(fake: Fake, toolbox: Path) -> None:
    env = {"GREETING": "from-a-task-ENV-step"}
    with ApptainerSandbox("/images/task.sif", toolbox=toolbox, env=env) as sandbox:
        init = fake.instances()[sandbox.sandbox_id]["pid"]
        assert sandbox._anchor_pid() == init
        assert sandbox.run('echo "$GREETING"').output == "from-a-task-ENV-step\n"
        assert sandbox.run("id -u").output == "1000\n"  # not root: no --fakeroot asked
        sandbox.run("sleep 300 &")
        sleeping = [pid for pid in sandbox.sandbox_pids() if _cmdline(pid) == "sleep 300"]
        assert len(sleeping) == 1  # the agent's processes, which descend from the exec
        assert init in sandbox.sandbox_pids()
        assert sandbox._cgroups("memory") == []  # never the job's own cgroup
        assert sandbox.reap() >= 1
        assert not [pid for pid in sandbox.sandbox_pids() if _cmdline(pid) == "sleep 300"]
        assert sandbox.run("echo alive").output == "alive\n"


@pytest.mark.slow
@needs_bwrap
def test_without_cgroups_our_own_watch_limits_memory_and_processes(
    fake: Fake, toolbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_APPTAINER_CGROUPS", "fail")
    limits = Limits(memory_mb=128, pids=64)
    with ApptainerSandbox("/images/task.sif", limits, toolbox=toolbox) as sandbox:
        assert sandbox.degraded and sandbox.oom_kills() == 0
        bomb = sandbox.run("x=$(head -c 400M /dev/zero | tr '\\0' a); echo ${#x}", timeout=60)
        assert bomb.oom_killed, bomb
        assert "memory" in str(sandbox.exhausted())
        many = sandbox.run("for i in $(seq 100); do sleep 60 & done; wait", timeout=30)
        assert "ran out of processes" in many.output, many
        assert "processes" in str(sandbox.exhausted())
        assert len(sandbox.sandbox_pids()) < 20
        assert sandbox.run("echo alive").output == "alive\n"


@pytest.mark.slow
@needs_bwrap
def test_without_apptainers_pid_namespace_the_agent_cannot_touch_the_nodes_processes(
    fake: Fake, toolbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_APPTAINER_PIDNS", "no")
    with ApptainerSandbox("/images/task.sif", toolbox=toolbox) as sandbox:
        # the control shell (not the agent) sees the node's processes: the premise
        seen = sandbox._control(
            "cat /proc/*/cmdline | tr '\\0' ' ' | grep -c pytest; printf '\\n%s 0\\n' @MARKER@", 30
        )[0]
        assert int(seen.split()[0]) > 0
        # The agent may see their numbers (no fresh /proc in a user namespace) but, in a
        # PID namespace and a user namespace of its own, cannot signal or read them.
        probe = sandbox.run(
            "for p in /proc/[0-9]*; do grep -q pytest $p/cmdline 2>/dev/null && "
            "{ p=${p#/proc/}; break; }; done; echo pid=$p; "
            "cat /proc/$p/environ >/dev/null 2>&1 && echo readable || echo denied; "
            "ls -l /proc/$p/fd/ >/dev/null 2>&1 && echo fds || echo no-fds; "
            "kill -0 $p 2>/dev/null && echo signalable || echo unreachable"
        )
        assert probe.output.split()[0] != "pid=", probe.output  # one was found
        assert probe.output.split()[1:] == ["denied", "no-fds", "unreachable"], probe.output


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


@pytest.mark.slow
@needs_bwrap
def test_close_stops_the_instance(fake: Fake, toolbox: Path) -> None:
    sandbox = ApptainerSandbox("/images/task.sif", toolbox=toolbox).start()
    name = sandbox.sandbox_id
    assert list(fake.instances()) == [name]
    sandbox.close()
    assert fake.calls()[-1] == ["--quiet", "instance", "stop", name]
    assert fake.instances() == {}
    sandbox.close()  # already gone: no error, no second stop
    assert fake.calls().count(["--quiet", "instance", "stop", name]) == 1


def test_stopping_an_instance_removes_its_logs_from_home(
    fake: Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    logs = tmp_path / "home/.apptainer/instances/logs" / socket.gethostname() / getpass.getuser()
    logs.mkdir(parents=True)
    name = instance_name("r", "tmax-task-0")
    for file in (f"{name}.out", f"{name}.err", "someone-elses.out"):
        (logs / file).write_text("log\n")
    fake.start_instance(name)
    assert ApptainerSandbox.cleanup("r") == [name]
    assert sorted(p.name for p in logs.iterdir()) == ["someone-elses.out"]


def test_cleanup_stops_only_the_runs_instances(fake: Fake) -> None:
    run_a = [instance_name("a", f"tmax-task-{i}") for i in range(2)]
    run_ab = instance_name("a-b", "tmax-task-0")  # "a" is a prefix of "a-b"
    run_c = instance_name("c", "tmax-task-0")
    for name in [*run_a, run_ab, run_c, "someone-elses-instance"]:
        fake.start_instance(name)
    assert sorted(ApptainerSandbox.cleanup("a")) == sorted(run_a)
    assert ["instance", "list", "--json"] in [c[1:] for c in fake.calls()]
    assert sorted(fake.instances()) == sorted([run_ab, run_c, "someone-elses-instance"])
    assert ApptainerSandbox.cleanup("zzz") == []
    assert sorted(ApptainerSandbox.cleanup()) == sorted([run_ab, run_c])
    assert list(fake.instances()) == ["someone-elses-instance"]


def test_missing_binary(tmp_path: Path, toolbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("TMAX_APPTAINER_BIN", raising=False)
    sandbox = ApptainerSandbox("/x.sif", toolbox=toolbox)
    with pytest.raises(SandboxError, match="singularity") as raised:
        sandbox.start()
    assert "podman" in str(raised.value) and "bwrap" in str(raised.value)
    assert ApptainerSandbox.cleanup() == []
    sandbox.close()  # nothing started, nothing to stop
    with pytest.raises(ImageError, match="podman"):
        build_sif("Bootstrap: docker\nFrom: x\n", tmp_path, tmp_path / "x.sif")


def test_argv_matches_spython(fake: Fake, toolbox: Path) -> None:
    """Our commands have the form spython's Client gives them (the backend's contract)."""
    pytest.importorskip("spython")
    from spython.main import Client

    sandbox = ApptainerSandbox("/images/task.sif", toolbox=toolbox)
    ours = ["--quiet", *sandbox._start_args()]
    *options, image, name = sandbox._start_args()[2:]
    instance = Client.instance(image, name=name, options=options, quiet=True)
    instance.stop()
    Client.instances(quiet=True)
    spython_calls = [c for c in fake.calls() if c != ["--version"]]
    assert spython_calls[0] == ours
    assert ["--quiet", "instance", "stop", name] in spython_calls
    assert ["instance", "list", "--json"] in spython_calls


# --- images -----------------------------------------------------------------------------

DOCKERFILE = """\
FROM debian:bookworm-slim
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && \\
    apt-get install -y --no-install-recommends jq
COPY data.txt /opt/data.txt
WORKDIR /app
COPY --chown=root:root run.sh .
ENV X=1
CMD ["bash"]
"""


def section(definition: str, name: str) -> list[str]:
    lines = definition.splitlines()
    start = lines.index(f"%{name}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("%")), len(lines))
    return lines[start:end]


def test_dockerfile_to_definition() -> None:
    pytest.importorskip("spython")
    definition = dockerfile_to_definition(DOCKERFILE)
    assert definition.startswith("Bootstrap: docker\nFrom: debian:bookworm-slim\n")
    post = section(definition, "post")
    assert "apt-get install -y --no-install-recommends jq" in post
    assert "export DEBIAN_FRONTEND=noninteractive" in post  # ENV reaches later RUN steps
    assert "mkdir -p /app" in post
    assert section(definition, "files") == ["data.txt /opt/data.txt", "run.sh /app/"]
    assert "export X=1" in section(definition, "environment")
    assert "%startscript" not in definition


def _apptainer_files(definition: str, context: Path, rootfs: Path) -> None:
    """Run ``%files`` as Apptainer's build does (internal/pkg/build/files/copy.go): a
    destination ending in ``/`` is created whole, else only its parent; then
    ``cp -fLr SRC DST`` from the build context."""
    for line in section(definition, "files"):
        source, destination = line.split()
        target = str(rootfs) + destination
        if not Path(target).exists():
            made = Path(target) if destination.endswith("/") else Path(target).parent
            made.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-fLr", source, target], cwd=context, check=True)


def _docker_copy(context: Path, rootfs: Path, copies: list[tuple[str, str]]) -> None:
    """What Docker's COPY does: a directory's contents land in the destination."""
    for source, destination in copies:
        target = Path(str(rootfs) + destination)
        if (context / source).is_dir():
            shutil.copytree(context / source, target, dirs_exist_ok=True)
        else:
            made = target if destination.endswith("/") else target.parent
            made.mkdir(parents=True, exist_ok=True)
            shutil.copy(context / source, target)


@pytest.mark.parametrize(
    ("task", "copies"),
    [
        ("redteam/swe-shaped-fix-median", [("testbed", "/testbed/")]),
        ("tasks/sum-csv-column", [("data", "/app/data/")]),
    ],
)
def test_copied_directories_land_where_docker_puts_them(
    tmp_path: Path, task: str, copies: list[tuple[str, str]]
) -> None:
    pytest.importorskip("spython")
    context = FIXTURES / task / "environment"
    definition = dockerfile_to_definition((context / "Dockerfile").read_text(), context=context)
    _apptainer_files(definition, context, tmp_path / "apptainer")
    _docker_copy(context, tmp_path / "docker", copies)

    def tree(root: Path) -> list[str]:
        return sorted(str(p.relative_to(root)) for p in root.rglob("*"))

    assert tree(tmp_path / "apptainer") == tree(tmp_path / "docker")
    # without the build context only sources spelled with a trailing / are known dirs
    nested = dockerfile_to_definition("FROM x\nCOPY app /app/\n")
    assert section(nested, "files") == ["app /app/"]
    assert section(dockerfile_to_definition("FROM x\nCOPY app/ /app/\n"), "files") == [
        "app/. /app/"
    ]


def test_dockerfile_to_definition_with_a_local_base(tmp_path: Path) -> None:
    pytest.importorskip("spython")
    base = tmp_path / "base.sif"
    definition = dockerfile_to_definition(DOCKERFILE, base=base)
    assert definition.startswith(f"Bootstrap: localimage\nFrom: {base}\n")
    assert "debian:bookworm-slim" not in definition
    other = dockerfile_to_definition(DOCKERFILE, base="oras://ghcr.io/x/base:1")
    assert other.startswith("Bootstrap: oras\nFrom: ghcr.io/x/base:1\n")
    with pytest.raises(ValueError, match="FROM"):
        dockerfile_to_definition("RUN true\n")


def test_build_sif_builds_once_and_rebuilds_on_change(fake: Fake, tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "data.txt").write_text("1\n")
    output = tmp_path / "images" / "task.sif"
    definition = "Bootstrap: docker\nFrom: debian:bookworm-slim\n%files\ndata.txt /data.txt\n"

    def builds() -> list[dict[str, Any]]:
        return [r for r in fake.records() if r["argv"][0] == "build"]

    assert build_sif(definition, context, output) == output
    assert output.read_text().startswith("SIF Bootstrap: docker")
    (first,) = builds()
    assert first["cwd"] == str(context)
    tmp_sif, def_file = first["argv"][1:]
    assert Path(tmp_sif).parent == output.parent and tmp_sif != str(output)
    assert not Path(tmp_sif).exists() and not Path(def_file).exists()
    assert output.with_suffix(".sif.key").read_text().strip()

    build_sif(definition, context, output)
    assert len(builds()) == 1  # unchanged: skipped

    build_sif(definition + "%post\ntrue\n", context, output, fakeroot=True)
    assert len(builds()) == 2 and builds()[-1]["argv"][1] == "--fakeroot"
    assert output.read_text().endswith("true\n")

    (context / "data.txt").write_text("2\n")
    build_sif(definition + "%post\ntrue\n", context, output)
    assert len(builds()) == 3

    leftovers = sorted(p.name for p in output.parent.iterdir())
    assert leftovers == ["task.sif", "task.sif.key", "task.sif.lock"]


def test_build_sif_failure_keeps_the_old_image(fake: Fake, tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    output = context / "task.sif"  # inside the context: its own files must not count
    build_sif("Bootstrap: docker\nFrom: a\n", context, output)
    before = output.read_text()
    (fake.bin_dir / "singularity").write_text("#!/bin/sh\necho 'FATAL: no space' >&2\nexit 1\n")
    with pytest.raises(ImageError, match="no space"):
        build_sif("Bootstrap: docker\nFrom: b\n", context, output)
    assert output.read_text() == before
    build_sif("Bootstrap: docker\nFrom: a\n", context, output)  # still current: no build
    own_files = sorted(p.name for p in context.iterdir())
    assert own_files == ["task.sif", "task.sif.key", "task.sif.lock"]


def test_build_sif_rebuilds_when_its_local_base_changes(fake: Fake, tmp_path: Path) -> None:
    pytest.importorskip("spython")
    context = tmp_path / "context"
    context.mkdir()
    base = tmp_path / "base.sif"
    child = tmp_path / "child.sif"
    definition = dockerfile_to_definition("FROM debian:bookworm-slim\nRUN true\n", base=base)

    def build_count() -> int:
        return sum(call[0] == "build" for call in fake.calls())

    build_sif("Bootstrap: docker\nFrom: debian:bookworm-slim\n", context, base)
    build_sif(definition, context, child)
    build_sif(definition, context, child)
    assert build_count() == 2
    build_sif("Bootstrap: docker\nFrom: debian:trixie-slim\n", context, base)
    build_sif(definition, context, child)
    assert build_count() == 4


def test_a_generated_task_runs_on_its_domains_sif_plus_its_own_steps(
    fake: Fake, toolbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("spython")
    monkeypatch.setenv("TMAX_SIF_DIR", str(tmp_path / "sif"))
    boxes = [
        sandbox_for_task(
            family_task(name, tmp_path / name), "apptainer", toolbox=toolbox, preflight=False
        )
        for name in ("data_querying.sales_report", "data_querying.sales_report")
    ]
    for box in boxes:
        assert isinstance(box, ApptainerSandbox)
        assert box.image == str(tmp_path / "sif" / "base-data_querying.sif")
        assert box.workdir == "/app" and len(_steps(box)) == 1  # COPY app/, RUN sqlite3
    own = sandbox_for_task(
        FIXTURES / "tasks" / "sum-csv-column", "apptainer", toolbox=toolbox, preflight=False
    )  # apt-get in its own RUN: not a domain base plus steps
    assert own.image == str(tmp_path / "sif" / "sum-csv-column.sif")
    assert own.workdir == "/app" and _steps(own) == []
    built = [Path(c[-2]).name.split(".sif.")[0] for c in fake.calls() if c[0] == "build"]
    # one registry pull (the Debian base), the domain image on it, once; none per task
    assert built == [".debian-bookworm-slim", ".base-data_querying", ".sum-csv-column"]
    domain = (tmp_path / "sif" / "base-data_querying.sif").read_text()
    base = tmp_path / "sif" / "debian-bookworm-slim.sif"
    assert domain.startswith(f"SIF Bootstrap: localimage\nFrom: {base}\n")


def _steps(box: Sandbox) -> list[Callable[[Sandbox], None]]:
    """The task's own start hooks (the image steps), not the backend's."""
    return [hook for hook in box.on_start if hook is not apptainer._start_watch]


@pytest.fixture
def node(fake: Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A compute node: its local disk (sandboxes, the kept preflight) and SIF store."""
    pytest.importorskip("spython")
    monkeypatch.setenv("TMAX_SANDBOX_DIR", str(tmp_path / "node-local"))
    monkeypatch.setenv("TMAX_SIF_DIR", str(tmp_path / "sif"))
    return tmp_path / "node-local"


@pytest.mark.slow
@needs_bwrap
def test_a_node_where_the_sandbox_user_is_not_root_stops_before_its_first_episode(
    fake: Fake, node: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_APPTAINER_CGROUPS", "fail")
    task = family_task("data_querying.sales_report", tmp_path / "task")
    # the fake gives uid 1000 inside without --fakeroot: a site without root inside
    with pytest.raises(SandboxError) as raised:
        sandbox_for_task(task, "apptainer")
    message = str(raised.value)
    assert "tmax sandbox preflight --backend apptainer" in message
    assert "| root inside | FAIL |" in message and "--fakeroot" in message
    assert "| memory/CPU/PID limits | degraded | instance start failed" in message
    assert not list(node.glob("preflight-*.json"))  # asked again
    with pytest.raises(SandboxError, match="root inside"):
        sandbox_for_task(task, "apptainer")
    assert fake.instances() == {}  # the probe's instances are gone


@pytest.mark.slow
@needs_bwrap
def test_a_user_without_root_on_a_node_without_cgroup_delegation_passes_preflight(
    fake: Fake, node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    checks = {check.name: check for check in preflight("apptainer")}
    assert {name for name, c in checks.items() if c.status != "ok"} == {"memory/CPU/PID limits"}, (
        table(list(checks.values()))
    )
    assert checks["root inside"].detail == "0"  # --fakeroot
    assert checks["verifier"].detail == "reward 1"
    assert "--fakeroot" in next(c for c in fake.calls() if c[1:3] == ["instance", "start"])


# --- a real Apptainer, where there is one -----------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("apptainer") is None, reason="Apptainer is not installed")
def test_real_apptainer(toolbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The toolbox's links resolve inside the container, to Debian's own tools.
    monkeypatch.setenv("TMAX_APPTAINER_BIN", "apptainer")
    image = os.environ.get("TMAX_APPTAINER_TEST_IMAGE", "docker://debian:bookworm-slim")
    with ApptainerSandbox(image, toolbox=toolbox, run_id="apptainer-test") as sandbox:
        assert sandbox.run("echo hi").output == "hi\n"
        assert sandbox.run("cat /etc/debian_version").exit_code == 0
    assert ApptainerSandbox.cleanup("apptainer-test") == []
