"""Each phase's network, resolved as Harbor resolves it and enforced per phase.

The resolution is checked against Harbor 0.26's rules (harbor/models/task/config.py and
harbor/trial/network_policy.py) on small task.toml files; the enforcement in real bwrap
and podman sandboxes, where the agent's phase and the verifier's differ; the Apptainer
options against the fake ``singularity`` of test_apptainer.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_TASKS
from tests.sandbox.test_apptainer import fake, start_args, toolbox  # noqa: F401 (fixtures)
from tests.sandbox.test_sandbox import (  # noqa: F401 (fixtures)
    _available,
    backend,
    host_server,
)
from tmax.sandbox.apptainer import ApptainerSandbox
from tmax.sandbox.base import (
    Limits,
    NetworkPlan,
    PhaseNetwork,
    Sandbox,
    host_addresses,
    resolve_network,
)
from tmax.sandbox.bwrap import BwrapSandbox
from tmax.sandbox.episode import sandbox_for_task
from tmax.sandbox.podman import PodmanSandbox
from tmax.sandbox.redteam import HostServer
from tmax.tasks import TaskConfig, TaskFormatError, read_task

PUBLIC, OFF, ALLOW = "public", "no-network", "allowlist"

# task.toml body -> {policy: (agent phase, verifier phase)}
RESOLUTION = [
    ("", {"harbor": (PUBLIC, PUBLIC), "task": (OFF, OFF), "off": (OFF, OFF)}),
    (
        '[environment]\nnetwork_mode = "no-network"\n',
        {"harbor": (OFF, OFF), "task": (OFF, OFF), "off": (OFF, OFF)},
    ),
    (
        '[environment]\nnetwork_mode = "public"\n',
        {"harbor": (PUBLIC, PUBLIC), "task": (PUBLIC, PUBLIC), "off": (OFF, OFF)},
    ),
    # the deprecated flag, both ways
    ("[environment]\nallow_internet = false\n", {"harbor": (OFF, OFF), "task": (OFF, OFF)}),
    (
        "[environment]\nallow_internet = true\n",
        {"harbor": (PUBLIC, PUBLIC), "task": (PUBLIC, PUBLIC)},
    ),
    # network_mode wins over allow_internet
    (
        '[environment]\nallow_internet = true\nnetwork_mode = "no-network"\n',
        {"harbor": (OFF, OFF), "task": (OFF, OFF)},
    ),
    # phase overrides: the verifier may have the network the agent has not, and back
    (
        '[environment]\nnetwork_mode = "no-network"\n[verifier]\nnetwork_mode = "public"\n',
        {"harbor": (OFF, PUBLIC), "task": (OFF, PUBLIC), "off": (OFF, OFF)},
    ),
    ('[verifier]\nnetwork_mode = "no-network"\n', {"harbor": (PUBLIC, OFF), "task": (OFF, OFF)}),
    ('[agent]\nnetwork_mode = "no-network"\n', {"harbor": (OFF, PUBLIC), "task": (OFF, OFF)}),
    ('[agent]\nnetwork_mode = "public"\n', {"harbor": (PUBLIC, PUBLIC), "task": (PUBLIC, OFF)}),
    # a separate verifier environment has its own baseline (public by default)
    (
        '[environment]\nnetwork_mode = "no-network"\n[verifier.environment]\ncpus = 1\n',
        {"harbor": (OFF, PUBLIC), "task": (OFF, OFF)},
    ),
    (
        "[verifier.environment]\nallow_internet = false\n",
        {"harbor": (PUBLIC, OFF), "task": (OFF, OFF)},
    ),
    # "separate" without its own environment: a copy of [environment]
    (
        '[environment]\nnetwork_mode = "no-network"\n[verifier]\nenvironment_mode = "separate"\n',
        {"harbor": (OFF, OFF)},
    ),
]


@pytest.mark.parametrize(("toml", "expected"), RESOLUTION)
def test_phase_networks_resolve_as_harbor_does(toml: str, expected: dict[str, tuple]) -> None:
    config = TaskConfig.parse(toml)
    for policy, (agent, verifier) in expected.items():
        plan = resolve_network(config, policy)
        assert (plan.agent.mode, plan.verifier.mode) == (agent, verifier), (policy, toml)


def test_an_allowlist_keeps_its_hosts_and_runs_as_full_network() -> None:
    config = TaskConfig.parse(
        '[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n'
        '[verifier]\nnetwork_mode = "allowlist"\nallowed_hosts = ["*.ubuntu.com"]\n'
    )
    plan = resolve_network(config, "harbor")
    assert plan.agent == PhaseNetwork(ALLOW, ("pypi.org",)) and plan.agent.enabled
    assert plan.verifier == PhaseNetwork(ALLOW, ("*.ubuntu.com",))
    assert plan.record()["agent"]["enforced"].startswith("full network")


@pytest.mark.parametrize(
    "toml",
    [
        '[agent]\nnetwork_mode = "offline"\n',
        '[verifier]\nallowed_hosts = ["pypi.org"]\n',
        '[environment]\nallowed_hosts = ["pypi.org"]\n',  # mode defaults to public
        '[verifier]\nnetwork_mode = "public"\nallowed_hosts = ["pypi.org"]\n',
    ],
)
def test_bad_network_settings_name_the_field(toml: str) -> None:
    with pytest.raises(TaskFormatError, match=r"\[(agent|verifier|environment)\]"):
        resolve_network(TaskConfig.parse(toml), "harbor")


def test_an_unknown_policy_names_the_choices() -> None:
    with pytest.raises(ValueError, match="harbor, task, off"):
        resolve_network(TaskConfig.parse(""), "on")


def test_limits_from_task_take_the_policy_and_keep_the_safe_default() -> None:
    task = read_task(FIXTURE_TASKS / "no-solution-prebuilt")  # says nothing on network
    default = Limits.from_task(task)
    assert (default.network, default.verifier_has_network) == (False, False)
    assert default.network_plan is not None and default.network_plan.policy == "task"
    harbor = Limits.from_task(task, network_policy="harbor")
    assert (harbor.network, harbor.verifier_has_network, harbor.sandbox_network) == (
        True,
        True,
        True,
    )
    assert not Limits.from_task(task, network_policy="off").sandbox_network


def _plan(agent: str, verifier: str) -> NetworkPlan:
    return NetworkPlan("harbor", PhaseNetwork(agent), PhaseNetwork(verifier))


def _limits(agent: bool, verifier: bool) -> Limits:
    modes = {True: PUBLIC, False: OFF}
    return Limits(
        network=agent, verifier_network=verifier, network_plan=_plan(modes[agent], modes[verifier])
    )


def _bwrap(limits: Limits, tmp_path: Path) -> BwrapSandbox:
    (tmp_path / "root" / "bin").mkdir(parents=True, exist_ok=True)
    return BwrapSandbox(tmp_path / "root", limits, toolbox=tmp_path)


@pytest.mark.parametrize(
    ("agent", "verifier", "shared", "agent_ns", "verifier_ns"),
    [
        (False, False, False, False, False),  # no network anywhere: nothing to separate
        (True, True, True, False, False),
        (False, True, True, True, False),  # the agent offline in a sandbox with network
        (True, False, True, False, True),
    ],
)
def test_the_sandbox_has_the_network_of_either_phase_and_the_other_its_own(
    tmp_path: Path, agent: bool, verifier: bool, shared: bool, agent_ns: bool, verifier_ns: bool
) -> None:
    box = _bwrap(_limits(agent, verifier), tmp_path)
    assert "--share-net" not in box._bwrap_args()  # never the host's: pasta once up
    assert box.limits.sandbox_network is shared
    assert (box.agent_netns, box.verifier_netns) == (agent_ns, verifier_ns)
    podman = PodmanSandbox("img", _limits(agent, verifier), toolbox=tmp_path)
    args = podman._run_args([])
    assert args[args.index("--network") + 1] == ("bridge" if shared else "none")
    record = box.network
    assert record["agent"]["network"] is agent and record["verifier"]["network"] is verifier
    assert record["agent"]["own_namespace"] is agent_ns
    assert record["verifier"]["own_namespace"] is verifier_ns


def test_limits_made_by_hand_are_recorded_too(tmp_path: Path) -> None:
    record = _bwrap(Limits(network=True), tmp_path).network
    assert record["policy"] == "explicit"
    assert record["agent"]["network_mode"] == record["verifier"]["network_mode"] == PUBLIC


def test_an_allowlist_and_a_kept_agent_are_noted_as_degraded(tmp_path: Path) -> None:
    plan = NetworkPlan("harbor", PhaseNetwork(ALLOW, ("pypi.org",)), PhaseNetwork(OFF))
    limits = Limits(
        network=True, verifier_network=False, network_plan=plan, keep_agent_processes=True
    )
    degraded = _bwrap(limits, tmp_path).degraded
    assert any("agent's allowlist" in note for note in degraded)
    assert any("cannot reach the agent's services" in note for note in degraded)


def test_apptainer_never_starts_in_the_nodes_network(
    fake,  # noqa: F811 (the imported fixture)
    toolbox: Path,  # noqa: F811
) -> None:
    """An instance always has a network namespace of its own; one whose verifier has the
    network gets pasta's user-mode networking in it once up (tested in real sandboxes
    below), never the node's namespace."""
    offline_agent = ApptainerSandbox("/x.sif", _limits(False, True), toolbox=toolbox)
    assert "--net --network none" in " ".join(start_args(offline_agent, fake))
    assert offline_agent.agent_netns and not offline_agent.verifier_netns
    offline = ApptainerSandbox("/x.sif", _limits(False, False), toolbox=toolbox)
    assert "--net --network none" in " ".join(start_args(offline, fake))


# --- enforcement in real sandboxes -----------------------------------------------------

ANSWER_TASK = FIXTURE_TASKS / "answer-checked-by-pytest"
PYTHON = "/opt/tmax/bin/python3 -I -S -c"
PROBE = (
    "echo IFACES $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '); "
    f'{PYTHON} \'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); '
    'socket.create_connection(s.getsockname()).close(); print("LOOPBACK ok")\'; '
    "(exec 3<>/dev/tcp/127.0.0.1/{port} && echo HOST $(cat <&3)) 2>/dev/null || echo HOST none"
)
"""What a phase sees: its interfaces (/proc/net/dev is per network namespace), whether
its loopback works, and whether the host's loopback server answers (it never may)."""


def _seen(output: str) -> dict[str, str]:
    return {
        line.split(" ", 1)[0]: line.partition(" ")[2].strip()
        for line in output.splitlines()
        if line.split(" ", 1)[0] in ("IFACES", "LOOPBACK", "HOST")
    }


def _online(seen: dict[str, str], kind: str) -> bool:
    interfaces = seen["IFACES"].split()
    assert "lo" in interfaces, seen
    reached = [i for i in interfaces if i != "lo"] != []
    assert seen["HOST"] == "none", seen  # the host's loopback server, from every phase
    return reached


def _verify(box: Sandbox, tmp_path: Path, port: int) -> dict[str, str]:
    tests = tmp_path / "tests"
    tests.mkdir()
    script = f"#!/bin/bash\n{PROBE.format(port=port)}\necho 1 > /logs/verifier/reward.txt\n"
    (tests / "test.sh").write_text(script)
    result = box.verify(tests, timeout=60)
    assert result.reward == 1.0, result
    return _seen(result.output)


@pytest.mark.slow
def test_an_offline_agent_stays_offline_while_its_verifier_has_the_network(
    backend: str,  # noqa: F811 (the imported fixture)
    host_server: int,  # noqa: F811 (the imported fixture)
    tmp_path: Path,
) -> None:
    with sandbox_for_task(
        ANSWER_TASK, backend, run_id="pytest", network=False, verifier_network=True
    ) as box:
        agent = _seen(box.run(PROBE.format(port=host_server), timeout=30).output)
        assert not _online(agent, backend) and agent["LOOPBACK"] == "ok"
        # every command joins the same namespace: a service started in one answers the next
        serve = textwrap.dedent("""\
            import socket; s = socket.socket(); s.bind(("127.0.0.1", 7071)); s.listen()
            c, _ = s.accept(); c.sendall(b"agent-service"); c.close()""")
        box.run(f"{PYTHON} '{serve}' > /dev/null 2>&1 & sleep 1")
        reply = box.run("exec 3<>/dev/tcp/127.0.0.1/7071 && cat <&3", timeout=10).output
        assert reply == "agent-service"
        assert _online(_verify(box, tmp_path, host_server), backend)
        record = box.network
        assert record["agent"]["own_namespace"] and not record["agent"]["network"]
        assert record["verifier"]["network"] and not record["verifier"]["own_namespace"]


@pytest.mark.slow
def test_a_verifier_without_network_gets_its_own_loopback_only(
    backend: str,  # noqa: F811 (the imported fixture)
    host_server: int,  # noqa: F811 (the imported fixture)
    tmp_path: Path,
) -> None:
    with sandbox_for_task(
        ANSWER_TASK, backend, run_id="pytest", network=True, verifier_network=False
    ) as box:
        assert _online(_seen(box.run(PROBE.format(port=host_server), timeout=30).output), backend)
        verifier = _verify(box, tmp_path, host_server)
        assert not _online(verifier, backend) and verifier["LOOPBACK"] == "ok"


class _UserNamespaceBwrap(BwrapSandbox):
    """bwrap whose agent and verifier namespaces get a user namespace of their own, as
    under unprivileged Apptainer (whose fake here has no Python to run the real thing)."""

    own_user_namespace = True


@pytest.mark.slow
def test_an_offline_agent_in_its_own_user_namespace_joins_both(
    host_server: int,  # noqa: F811 (the imported fixture)
    tmp_path: Path,
) -> None:
    reason = _available("bwrap")
    if reason:
        pytest.skip(reason)
    box = sandbox_for_task(
        ANSWER_TASK, "bwrap", run_id="pytest", network=False, verifier_network=True
    )
    box.__class__ = _UserNamespaceBwrap
    with box:
        agent = _seen(box.run(PROBE.format(port=host_server), timeout=30).output)
        assert not _online(agent, "bwrap") and agent["LOOPBACK"] == "ok"
        assert _online(_verify(box, tmp_path, host_server), "bwrap")


# --- out, but not back to the host -----------------------------------------------------


@pytest.fixture
def outside() -> Iterator[tuple[str, int]]:
    """A server "outside": in a network namespace of its own, reached from the host over
    a veth pair (its host side is one more of the host's own addresses)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 to make a network namespace")
    tag = f"{os.getpid() % 100000}"
    name, host_end, far_end = f"tmaxo{tag}", f"tmaxh{tag}", f"tmaxf{tag}"
    net = f"10.203.{os.getpid() % 250}"
    port = 18000 + os.getpid() % 1000

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    ip("netns", "add", name)
    server = None
    try:
        ip("link", "add", host_end, "type", "veth", "peer", "name", far_end)
        ip("link", "set", far_end, "netns", name)
        ip("addr", "add", f"{net}.1/24", "dev", host_end)
        ip("link", "set", host_end, "up")
        ip("-n", name, "addr", "add", f"{net}.2/24", "dev", far_end)
        ip("-n", name, "link", "set", far_end, "up")
        ip("-n", name, "link", "set", "lo", "up")
        code = (
            f"import socket\ns = socket.create_server(('{net}.2', {port}))\n"
            "while True:\n    c, _ = s.accept()\n    c.sendall(b'outside-ok')\n    c.close()\n"
        )
        server = subprocess.Popen(["ip", "netns", "exec", name, sys.executable, "-c", code])
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((f"{net}.2", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"{net}.2", port
    finally:
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run(["ip", "link", "del", host_end], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


@pytest.fixture
def everywhere_on_the_host() -> Iterator[int]:
    """A server on every address of the host (its loopback included), dual-stack."""
    with HostServer(reply=b"host-secret") as server:
        yield server.port


def _reach_probe(outside: tuple[str, int], port: int) -> str:
    targets = [f"{outside[0]}:{outside[1]}", f"127.0.0.1:{port}", f"[::1]:{port}"]
    targets += [f"[{a}]:{port}" if ":" in a else f"{a}:{port}" for a in host_addresses()]
    lines = []
    for target in targets:
        address, _, number = target.rpartition(":")
        host = address.strip("[]")
        lines.append(
            f"(exec 3<>/dev/tcp/{host}/{number} && echo REACH {target} $(head -c 20 <&3)) "
            f"2>/dev/null || echo NONE {target}"
        )
    return "; ".join(lines)


def _reached(output: str) -> dict[str, str]:
    return {
        line.split()[1]: " ".join(line.split()[2:])
        for line in output.splitlines()
        if line.startswith("REACH ")
    }


def _check_reach(output: str, outside: tuple[str, int]) -> None:
    reached = _reached(output)
    assert reached.get(f"{outside[0]}:{outside[1]}") == "outside-ok", output
    assert set(reached) == {f"{outside[0]}:{outside[1]}"}, output  # nothing of the host


def _both_phases(box: Sandbox, tmp_path: Path, probe: str, outside: tuple[str, int]) -> None:
    _check_reach(box.run(probe, timeout=60).output, outside)
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text(f"#!/bin/bash\n{probe}\necho 1 > /logs/verifier/reward.txt\n")
    result = box.verify(tests, timeout=60)
    assert result.reward == 1.0, result
    _check_reach(result.output, outside)
    assert box.network["host"].startswith("unreachable"), box.network


@pytest.mark.slow
def test_a_phase_with_network_reaches_outside_but_never_the_host(
    backend: str,  # noqa: F811 (the imported fixture)
    outside: tuple[str, int],
    everywhere_on_the_host: int,
    tmp_path: Path,
) -> None:
    """Outward connections work (a server in a namespace the test made, over a veth);
    the host's loopback, its own addresses (the veth's host end, the podman bridge, the
    main interface) never answer, from the agent's commands or the verifier."""
    probe = _reach_probe(outside, everywhere_on_the_host)
    with sandbox_for_task(
        ANSWER_TASK, backend, run_id="pytest", network=True, verifier_network=True
    ) as box:
        _both_phases(box, tmp_path, probe, outside)


@pytest.mark.slow
def test_apptainer_with_network_reaches_outside_but_never_the_host(
    fake,  # noqa: F811 (the imported fixture)
    toolbox: Path,  # noqa: F811
    outside: tuple[str, int],
    everywhere_on_the_host: int,
    tmp_path: Path,
) -> None:
    if _available("bwrap"):
        pytest.skip("the fake's instances need bwrap and root")
    probe = _reach_probe(outside, everywhere_on_the_host)
    # the fake's stand-in toolbox has no Python to verify with: the agent's phase
    with ApptainerSandbox("/x.sif", Limits(network=True), toolbox=toolbox) as box:
        _check_reach(box.run(probe, timeout=60).output, outside)
        assert box.network["host"].startswith("unreachable"), box.network
