"""A procedural task sample of a config, shared by the generation benchmarks
(task_diversity.py, task_audit.py, persona_fit.py): the first N specs of the config,
with its seed or --seed, rendered at its generation.tier without sandbox validation."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import track

from tmax.config import load_config
from tmax.generate.procedural import render_task
from tmax.tasks import Task
from tmax.taxonomy import SamplerSettings, TaskSpec, load_taxonomy, sample_specs

ROOT = Path(__file__).resolve().parent.parent


def sample_parser(doc: str) -> argparse.ArgumentParser:
    """The arguments every sample benchmark takes: --n, --seed, --config."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="tasks to generate")
    parser.add_argument("--seed", type=int, default=None, help="default: the config's seed")
    parser.add_argument("--config", type=Path, default=ROOT / "configs/paper.yaml")
    return parser


@dataclass(frozen=True)
class Sample:
    config: dict[str, Any]
    seed: int
    tier: str
    n: int
    name: str
    """The config file's name, for the printed header."""

    def specs(self) -> list[TaskSpec]:
        taxonomy = load_taxonomy(self.config.get("taxonomy"))
        return sample_specs(taxonomy, SamplerSettings.from_config(self.config, taxonomy), 0,
                            self.n)  # fmt: skip

    def tasks(self, description: str = "generating tasks") -> Iterator[tuple[TaskSpec, Task]]:
        """Each spec with its rendered task, with a progress bar."""
        for spec in track(self.specs(), description=description):
            yield spec, render_task(spec, self.seed, tier=self.tier)

    def header(self) -> str:
        return f"{self.n} procedural tasks from {self.name}, seed {self.seed}, tier {self.tier}"


def sample_from(args: argparse.Namespace) -> Sample:
    config = load_config(args.config)
    seed = config["seed"] = config["seed"] if args.seed is None else args.seed  # sampler too
    tier = config.get("generation", {}).get("tier", "full")
    return Sample(config, seed, tier, args.n, args.config.name)
