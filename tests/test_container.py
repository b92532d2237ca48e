"""The workflow image (containers/): its Apptainer definition is spython's translation of
the Dockerfile, `snakemake --sdm apptainer` runs every job in it, and it builds with
podman, once per content, into an image with the pinned environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from containers import image
from tests.conftest import ROOT
from tests.workflow.rerun_matrix import copy_workflow_files
from tmax.io import cache_dir

FAKE_APPTAINER = """#!/bin/sh
# Stands in for Apptainer where none is installed: answers Snakemake's version check.
# Anything else would run a container, which a dry run must not.
if [ "$1" = "--version" ]; then echo "apptainer version 1.4.5"; exit 0; fi
echo "apptainer called in a dry run: $*" >&2
exit 1
"""


def test_definition_is_spythons_translation_of_the_dockerfile() -> None:
    derived = image.derive_definition(image.DOCKERFILE)
    assert image.DEFINITION.read_text() == derived, "run: python containers/image.py derive"
    assert derived.startswith("Bootstrap: docker\nFrom: debian:bookworm-slim\n")
    assert "export PATH=/opt/venv/bin:" in derived  # the pinned environment comes first


def test_check_names_a_stale_definition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "tmax-workflow.def"
    stale.write_text(image.DEFINITION.read_text().replace("torch==", "torch>="))
    monkeypatch.setattr(image, "DEFINITION", stale)
    assert image.main(["check"]) == 1
    assert "python containers/image.py derive" in capsys.readouterr().err
    assert image.main(["derive"]) == 0
    assert image.main(["check"]) == 0


@pytest.fixture
def apptainer_on_path(tmp_path: Path) -> dict[str, str]:
    """The environment with a stand-in ``apptainer`` first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apptainer").write_text(FAKE_APPTAINER)
    (bin_dir / "apptainer").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


PLAN_IN_CONTAINERS = """
import json, sys
from pathlib import Path

from snakemake.api import SnakemakeApi
from snakemake.settings.types import (
    DeploymentMethod, DeploymentSettings, OutputSettings, Quietness, ResourceSettings,
)

with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
    workflow_api = api.workflow(
        resource_settings=ResourceSettings(cores=1),
        deployment_settings=DeploymentSettings(deployment_method={DeploymentMethod.APPTAINER}),
        snakefile=Path("Snakefile"),
    )
    workflow_api.dag().execute_workflow(executor="dryrun")
    workflow = workflow_api._workflow  # the parsed workflow: its rules and the DAG planned
    print(json.dumps({
        "rules": {rule.name: rule.container_img for rule in workflow.rules},
        "jobs": sorted({(job.rule.name, job.container_img_url) for job in workflow.dag.jobs}),
        "images": sorted(workflow.dag.container_imgs),
    }))
"""


@pytest.mark.slow
def test_every_job_is_planned_in_the_image(tmp_path: Path, apptainer_on_path: dict) -> None:
    """Every rule, and every job of the embedded default's plan, runs in the configured
    image under --sdm apptainer."""
    workdir = tmp_path / "workflow"
    copy_workflow_files(workdir)
    result = subprocess.run(
        [sys.executable, "-c", PLAN_IN_CONTAINERS],
        cwd=workdir, env=apptainer_on_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    plan = json.loads(result.stdout.strip().splitlines()[-1])
    default = "containers/tmax-workflow.sif"
    assert plan["images"] == [default]
    assert plan["rules"] and set(plan["rules"].values()) == {default}, plan["rules"]
    planned = {rule for rule, _ in plan["jobs"]}
    assert {"sample_specs", "validate_tasks", "rl_train", "evaluate", "all"} <= planned
    assert {container for _, container in plan["jobs"]} == {default}


@pytest.mark.slow
def test_slurm_profile_plans_with_a_configured_image(
    tmp_path: Path, apptainer_on_path: dict
) -> None:
    """The user's command on a cluster: the Slurm profile with --sdm apptainer and an
    image given by URI (pulled once, before any job)."""
    workdir = tmp_path / "workflow"
    copy_workflow_files(workdir)
    uri = "docker://registry.example.org/tmax-workflow:test"
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--profile", "slurm", "--sdm", "apptainer", "-n",
         "--config", f"container={uri}"],
        cwd=workdir, env=apptainer_on_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    text = result.stdout + result.stderr
    assert result.returncode == 0, text
    assert f"Singularity image {uri} will be pulled." in text
    assert re.search(r"^rl_train\s+\d+$", text, flags=re.MULTILINE), text
    profile = yaml.safe_load((ROOT / "slurm/config.yaml").read_text())
    # Jobs read TMAX_* and SLURM_* settings from the environment: never --cleanenv.
    assert "--nv" in profile["apptainer-args"] and "--cleanenv" not in profile["apptainer-args"]


PROBE = """
import json, sys
from importlib import metadata

sys.path.insert(0, "src")  # as every workflow script does
import snakemake, tmax, torch

pins = json.loads(sys.argv[1])
print(json.dumps({
    "python": list(sys.version_info[:2]),
    "tmax": tmax.__file__,
    "installed": {name: metadata.version(name) for name in pins},
}))
"""

APPTAINER_BY_PODMAN = """#!{python}
# Apptainer played by podman: `apptainer exec` as Snakemake calls it, run with podman.
import os, subprocess, sys

args = sys.argv[1:]
if args == ["--version"]:
    print("apptainer version 1.4.5")
    sys.exit(0)
with open(os.environ["APPTAINER_CALLS"], "a") as calls:
    calls.write(repr(args) + "\\n")
args = [arg for arg in args if arg not in ("--quiet", "--silent", "--nv")]
assert args.pop(0) == "exec", args
run = ["podman", "run", "--rm", "--network", "none", "-v", f"{{os.getcwd()}}:{{os.getcwd()}}"]
workdir = os.getcwd()
while args[0].startswith("--"):
    option, value = args.pop(0), args.pop(0)
    if option == "--home":
        run += ["-v", f"{{value}}:{{value}}", "-e", f"HOME={{value}}"]
    elif option == "--bind":
        run += ["-v", value if ":" in value else f"{{value}}:{{value}}"]
    elif option == "--pwd":
        workdir = value
    else:
        sys.exit(f"unexpected option {{option}}")
sys.exit(subprocess.run([*run, "-w", workdir, *args]).returncode)
"""


@pytest.fixture(scope="module")
def workflow_image() -> str:
    """The workflow image, built here once per content (a second build is skipped), with
    this machine's local wheels where it has them (a CPU torch instead of CUDA's)."""
    if os.geteuid() != 0 or not (shutil.which("podman") and shutil.which("debootstrap")):
        pytest.skip("needs root, podman and debootstrap (./setup.sh installs them)")
    started = time.monotonic()
    name, built = image.build_image(local_wheels=True)
    first = time.monotonic() - started
    record = cache_dir() / "workflow-image" / f"{name.rsplit(':', 1)[1]}.json"
    if record.exists():  # how long the build took, whenever it ran
        built_as = json.loads(record.read_text())
        print(f"{name}: built in {built_as['seconds']} s, {built_as['bytes'] / 1e9:.2f} GB")
    print(f"{name}: {'built' if built else 'found'} in {first:.1f} s")
    return name


@pytest.mark.slow
def test_image_is_built_once_per_content(workflow_image: str) -> None:
    started = time.monotonic()
    assert image.build_image(local_wheels=True) == (workflow_image, False)
    assert time.monotonic() - started < 60  # asks podman, builds nothing


@pytest.mark.slow
def test_image_holds_the_pinned_environment(workflow_image: str) -> None:
    pins = image.image_pins(image.DOCKERFILE)
    probe = subprocess.run(
        ["podman", "run", "--rm", "--network", "none", "-v", f"{ROOT / 'src'}:/workflow/src:ro",
         "-w", "/workflow", workflow_image, "python", "-c", PROBE, json.dumps(sorted(pins))],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stdout + probe.stderr
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert found["python"] == [3, 11]  # Debian bookworm's
    assert found["tmax"] == "/workflow/src/tmax/__init__.py"  # the checkout's, not the image's
    # A local build label (torch's +cpu) is the same release as the pin.
    installed = {name: version.split("+")[0] for name, version in found["installed"].items()}
    assert installed == pins


@pytest.mark.slow
def test_a_rule_runs_in_the_image_under_sdm_apptainer(workflow_image: str, tmp_path: Path) -> None:
    """Snakemake's own `apptainer exec` command, with podman playing Apptainer: a spec
    shard is sampled inside the image."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apptainer").write_text(APPTAINER_BY_PODMAN.format(python=sys.executable))
    (bin_dir / "apptainer").chmod(0o755)
    calls = tmp_path / "apptainer-calls.txt"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "APPTAINER_CALLS": str(calls)}  # fmt: skip
    workdir = tmp_path / "workflow"
    copy_workflow_files(workdir)
    shard = "results/specs/shards/00000.parquet"
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", shard, "--cores", "1", "--sdm", "apptainer",
         "--config", f"container={workflow_image}"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert (workdir / shard).stat().st_size > 0
    (call,) = calls.read_text().splitlines()
    assert workflow_image in call and "sample_specs.py" in call
