"""The Apptainer backend against a fake ``singularity`` (Apptainer is not installable here).

The fake records every call as a JSON line, keeps instances in a state file and, for
``exec instance://NAME``, runs the command under bubblewrap on the host's root with
the instance's toolbox bound at /opt/tmax, as an unprivileged user (uid 1000, no
capabilities, in a user namespace: what an unprivileged Apptainer gives): the inside
of the "container" is the host, but base.py's control protocol, the agent's own
namespaces included, runs end to end through the backend.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tmax.sandbox.apptainer import (
    ApptainerSandbox,
    build_sif,
    dockerfile_to_definition,
    instance_name,
    run_prefix,
)
from tmax.sandbox.base import Limits, SandboxError
from tmax.sandbox.images import ImageError
from tmax.sandbox.toolbox import enter_binary

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")

TOOLS = [
    *("bash", "sh", "cat", "head", "tail", "timeout", "env", "mkdir", "chmod", "rm", "stat"),
    *("date", "tee", "wc", "awk", "sed", "tr", "sleep", "tar", "base64", "printf", "ls", "cp"),
    *("mv", "touch", "id", "pwd", "echo", "true", "false", "grep", "sort", "cut", "dirname"),
    *("unshare", "setpriv", "mount", "find"),
]

FAKE = r"""#!@PYTHON@
import json, os, sys

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
    binds = [options[i + 1] for i, o in enumerate(options) if o == "--bind"]
    toolbox = next(b.split(":")[0] for b in binds if b.split(":")[1] == "/opt/tmax")
    state[name] = {"image": image, "toolbox": toolbox, "options": options}
    save(state)
elif args[:2] == ["instance", "list"]:
    listed = [
        {"instance": n, "pid": 123, "img": s["image"], "ip": "", "logErrPath": "", "logOutPath": ""}
        for n, s in state.items()
    ]
    print(json.dumps({"instances": listed}, indent=4))
elif args[:2] == ["instance", "stop"]:
    name = args[-1]
    if name not in state:
        fatal(f"no instance found with name {name}")
    del state[name]
    save(state)
elif args[:1] == ["exec"]:
    target = next(a for a in args if a.startswith("instance://"))
    instance = state.get(target.removeprefix("instance://")) or fatal(f"no instance {target}")
    command = args[args.index(target) + 1:]
    os.execvp("bwrap", [
        "bwrap", "--bind", "/", "/", "--tmpfs", "/opt", "--tmpfs", "/tmp",
        "--ro-bind", instance["toolbox"], "/opt/tmax", "--dev", "/dev", "--proc", "/proc",
        "--cap-drop", "ALL", "--unshare-all", "--uid", "1000", "--gid", "1000",
        "--die-with-parent", *command,
    ])
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
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fake:
    handle = Fake(tmp_path)
    monkeypatch.setenv("PATH", f"{handle.bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("TMAX_APPTAINER_BIN", raising=False)
    return handle


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
    return root


def start_args(sandbox: ApptainerSandbox, fake: Fake) -> list[str]:
    """Run only the backend's ``_start`` and return the ``instance start`` argv."""
    process = sandbox._start()
    assert process.stdin is not None and process.stdout is not None
    process.stdin.close()  # the control shell (or a failed exec) ends at EOF
    process.wait(timeout=60)
    process.stdout.close()
    sandbox._stop()
    return next(c for c in fake.calls() if c[1:3] == ["instance", "start"])


def test_instance_start_options(fake: Fake, toolbox: Path) -> None:
    limits = Limits(memory_mb=1536, cpus=1.5, pids=256, network=False)
    sandbox = ApptainerSandbox("/images/task.sif", limits, toolbox=toolbox, run_id="r1")
    argv = start_args(sandbox, fake)
    name = sandbox.sandbox_id
    assert name.startswith(run_prefix("r1")) and name.startswith("tmax.sandbox-r1-")
    assert argv[:3] == ["--quiet", "instance", "start"]
    assert argv[-2:] == ["/images/task.sif", name]
    options = argv[3:-2]
    assert "--containall" in options and "--writable-tmpfs" in options
    assert options[options.index("--bind") + 1] == f"{toolbox}:/opt/tmax:ro"
    joined = " ".join(options)
    assert "--net --network none" in joined
    assert "--memory 1536M" in joined and "--cpus 1.5" in joined
    assert "--pids-limit 256" in joined
    assert "--fakeroot" not in options
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
    assert "--net" not in options and "--network" not in options
    assert "--fakeroot" in options
    assert sandbox.sandbox_id.startswith(run_prefix(os.environ.get("TMAX_RUN_ID", "default")))


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
def test_close_stops_the_instance(fake: Fake, toolbox: Path) -> None:
    sandbox = ApptainerSandbox("/images/task.sif", toolbox=toolbox).start()
    name = sandbox.sandbox_id
    assert list(fake.instances()) == [name]
    sandbox.close()
    assert fake.calls()[-1] == ["--quiet", "instance", "stop", name]
    assert fake.instances() == {}
    sandbox.close()  # already gone: no error, no second stop
    assert fake.calls().count(["--quiet", "instance", "stop", name]) == 1


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
