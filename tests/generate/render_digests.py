"""What the procedural generator renders, as one digest per task: the embedded default's
400 tasks and 2,000 tasks of ``configs/paper.yaml``'s specs (the ``full`` tier), for
the same seeds. A refactor of the families must keep every digest; a change that has
to alter a task's bytes rewrites the file in its own commit, saying why.

Rewrite the committed digests (root, after ./setup.sh):
    .venv/bin/python -m tests.generate.render_digests --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path

from tmax.config import load_config
from tmax.generate.procedural import render_task
from tmax.tasks import write_task
from tmax.taxonomy import SamplerSettings, load_taxonomy, sample_specs

ROOT = Path(__file__).resolve().parents[2]
DIGESTS = Path(__file__).with_name("data") / "render_digests.json"
SCALES = {"embedded": ("config.yaml", None), "paper": ("configs/paper.yaml", 2000)}
"""Each scale's config and how many of its specs (None: its sampler.n_specs)."""


def tree_digest(directory: Path) -> str:
    """sha256 over every file under ``directory``: its path, whether it is executable,
    and its bytes, in path order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        rel = path.relative_to(directory).as_posix()
        executable = "x" if path.stat().st_mode & 0o111 else "-"
        content = path.read_bytes()
        digest.update(f"{rel}\0{executable}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


def render_digests(scale: str) -> dict[str, str]:
    """``{task name: digest}`` of every task ``scale``'s config renders."""
    name, count = SCALES[scale]
    config = load_config(ROOT / name)
    taxonomy = load_taxonomy(config.get("taxonomy"))
    settings = SamplerSettings.from_config(config, taxonomy)
    specs = sample_specs(taxonomy, settings, 0, count or config["sampler"]["n_specs"])
    tier = config["generation"]["tier"]
    digests: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for spec in specs:
            directory = write_task(render_task(spec, config["seed"], tier=tier), tmp)
            digests[directory.name] = tree_digest(directory)
    return digests


def committed() -> dict[str, dict[str, str]]:
    return json.loads(DIGESTS.read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the committed digests")
    args = parser.parse_args()
    digests = {scale: render_digests(scale) for scale in SCALES}
    if args.write:
        DIGESTS.parent.mkdir(parents=True, exist_ok=True)
        DIGESTS.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {DIGESTS}: " + ", ".join(f"{k} {len(v)}" for k, v in digests.items()))
        return
    old = committed()
    for scale, found in digests.items():
        names = found.keys() | old[scale].keys()
        changed = sorted(k for k in names if found.get(k) != old[scale].get(k))
        print(f"{scale}: {len(found)} tasks, {len(changed)} differ from the committed digests")


if __name__ == "__main__":
    main()
