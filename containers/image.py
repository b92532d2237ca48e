"""The workflow image: ``containers/Dockerfile``, and the Apptainer definition that
spython derives from it (``containers/tmax-workflow.def``).

    python containers/image.py derive   # write tmax-workflow.def from the Dockerfile
    python containers/image.py check    # fail when tmax-workflow.def is not derived from it
    python containers/image.py build    # podman build, once per content; prints the image
    python containers/image.py pins     # what the image installs, one pin a line

Edit the Dockerfile, then ``derive``: the definition is spython's translation, byte for
byte (``spython recipe containers/Dockerfile``), and tests/test_container.py fails when
the two differ. The build needs no registry but PyPI's and Debian's: ``FROM
debian:bookworm-slim`` resolves to our debootstrap base (:mod:`tmax.sandbox.images`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from tmax.io import cache_dir, write_json  # noqa: E402
from tmax.sandbox.images import (  # noqa: E402
    IMAGE_FORMAT,
    IMAGE_LABEL,
    ImageError,
    ensure_podman_base,
    locked,
    podman_image_exists,
)

DOCKERFILE = HERE / "Dockerfile"
DEFINITION = HERE / "tmax-workflow.def"
REPOSITORY = "localhost/tmax-workflow"
BUILDER_MOUNTS = "/run/tmax-builder"
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.\-]*)(?:\[[^\]]*\])?==([^\s\"'\\]+)")


def derive_definition(dockerfile: Path = DOCKERFILE) -> str:
    """The Apptainer definition spython writes for ``dockerfile`` (as ``spython recipe``)."""
    from spython.main.parse.parsers import DockerParser
    from spython.main.parse.writers import SingularityWriter

    # The parser reads the file when it is made; parse() again would repeat every line.
    return SingularityWriter(DockerParser(str(dockerfile)).recipe).convert() + "\n"


def image_pins(dockerfile: Path = DOCKERFILE) -> dict[str, str]:
    """``{package: version}`` for every ``name==version`` the Dockerfile installs (names
    lower-case, ``_`` as ``-``, extras dropped)."""
    pins = {}
    for line in dockerfile.read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        for name, version in PIN.findall(line):
            pins[name.lower().replace("_", "-")] = version
    return pins


def builder_pip_settings() -> dict[str, list[str]]:
    """What this machine's pip uses to reach packages, to pass on to the build: its CA
    bundle (``cert``: a proxy's CA, say) and its local wheel folders (``find-links``: a
    CPU build of torch, say), from pip's configuration or the environment; only paths
    that exist here."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    configured = {
        option: [*re.findall(rf"{option}='([^']*)'", listed), os.environ.get(variable, "")]
        for option, variable in (("find-links", "PIP_FIND_LINKS"), ("cert", "PIP_CERT"))
    }
    wheel_dirs = {
        entry.removeprefix("file://")
        for value in configured["find-links"]
        for entry in value.split()
    }
    certs = {value for value in configured["cert"] if value}
    return {
        "PIP_FIND_LINKS": sorted(path for path in wheel_dirs if Path(path).is_dir()),
        "PIP_CERT": sorted(path for path in certs if Path(path).is_file())[:1],
    }


def content_key(dockerfile: Path, base_id: str, wheel_dirs: list[str]) -> str:
    """What the image is made of: the Dockerfile (and so its pins), the base image, and
    the local wheels offered (their names)."""
    wheels = {path: sorted(os.listdir(path)) for path in wheel_dirs}
    made_of = [IMAGE_FORMAT, dockerfile.read_text(), base_id, wheels]
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()[:16]


def build_image(dockerfile: Path = DOCKERFILE, local_wheels: bool = False) -> tuple[str, bool]:
    """``podman build`` the workflow image, tagged ``localhost/tmax-workflow:<content
    key>`` (and ``:latest``), unless an image of that content exists. Returns the image
    and whether it was built now; a build's seconds and size are recorded in
    ``$TMAX_CACHE/workflow-image/<key>.json``.

    Packages come from PyPI (torch with CUDA, for GPU nodes); with ``local_wheels`` pip
    prefers this machine's local wheels (a CPU torch, without CUDA's libraries: for tests).
    """
    base_id = ensure_podman_base()
    settings = builder_pip_settings()
    if not local_wheels:
        settings["PIP_FIND_LINKS"] = []
    key = content_key(dockerfile, base_id, settings["PIP_FIND_LINKS"])
    name = f"{REPOSITORY}:{key}"
    if podman_image_exists(name):
        return name, False
    with locked(f"build-workflow-{key}"):
        if podman_image_exists(name):
            return name, False
        command = ["podman", "build", "--pull=never", "--label", f"{IMAGE_LABEL}={IMAGE_FORMAT}"]
        # Mounted read-only for the build's steps (every step: so under /run, where no
        # package writes; a CA bundle mounted over the image's own breaks apt's steps).
        for variable, paths in settings.items():
            inside = [f"{BUILDER_MOUNTS}/{variable.lower()}{i}" for i in range(len(paths))]
            for path, target in zip(paths, inside, strict=True):
                command += ["--volume", f"{path}:{target}:ro"]
            command += ["--build-arg", f"{variable}={' '.join(inside)}"]
        started = time.monotonic()
        # Nothing is copied in: the build context is an empty folder.
        with tempfile.TemporaryDirectory() as context:
            command += ["-f", str(dockerfile), "-t", name, context]
            result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr)[-3000:]
            raise ImageError(f"podman build of {dockerfile} failed:\n{tail}")
        seconds = round(time.monotonic() - started, 1)
        subprocess.run(["podman", "tag", name, f"{REPOSITORY}:latest"], check=True)
        size = subprocess.run(
            ["podman", "image", "inspect", "--format", "{{.Size}}", name],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        write_json(
            cache_dir() / "workflow-image" / f"{key}.json",
            {"image": name, "seconds": seconds, "bytes": int(size), "pip": settings},
        )
    return name, True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("derive", help="write the Apptainer definition from the Dockerfile")
    actions.add_parser("check", help="fail when the definition is not derived from it")
    build = actions.add_parser("build", help="podman build the image, once per content")
    build.add_argument(
        "--local-wheels",
        action="store_true",
        help="prefer this machine's local wheels (pip's find-links: a CPU torch) to PyPI's",
    )
    actions.add_parser("pins", help="print the packages the image installs")
    args = parser.parse_args(argv)
    if args.action == "derive":
        DEFINITION.write_text(derive_definition())
        print(f"wrote {DEFINITION}")
    elif args.action == "check":
        if DEFINITION.read_text() != derive_definition():
            print(
                f"{DEFINITION} is not what spython derives from {DOCKERFILE}: "
                "run python containers/image.py derive",
                file=sys.stderr,
            )
            return 1
        print(f"{DEFINITION.name} is derived from {DOCKERFILE.name}")
    elif args.action == "build":
        name, built = build_image(local_wheels=args.local_wheels)
        print(name if built else f"{name} (already built)")
    else:
        print("\n".join(f"{name}=={version}" for name, version in image_pins().items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
