"""Stage entry points for sampling, called by the Snakemake scripts and the CLI."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.progress import track

from tmax.io import write_json, write_text
from tmax.taxonomy.balance import balance_report, render_markdown
from tmax.taxonomy.model import load_taxonomy
from tmax.taxonomy.sampler import (
    SamplerSettings,
    merge_spec_files,
    read_specs,
    sample_spec,
    write_specs,
)

log = logging.getLogger("tmax.taxonomy")


def sample_to_parquet(
    config: Mapping[str, Any],
    output: str | Path,
    start: int = 0,
    stop: int | None = None,
    taxonomy_path: str | Path | None = None,
) -> int:
    """Draw specs ``start`` … ``stop - 1`` under ``config`` and write them as Parquet."""
    taxonomy = load_taxonomy(taxonomy_path if taxonomy_path is not None else config.get("taxonomy"))
    settings = SamplerSettings.from_config(config, taxonomy)
    stop = settings.n_specs if stop is None else min(stop, settings.n_specs)
    indices = range(start, stop)
    show = len(indices) >= 2000
    specs = [
        sample_spec(taxonomy, settings, i)
        for i in track(indices, description="sampling specs", disable=not show)
    ]
    write_specs(specs, output)
    log.info("wrote %d specs (indices %d-%d) to %s", len(specs), start, stop - 1, output)
    return len(specs)


def merge_specs(inputs: Sequence[str | Path], output: str | Path) -> int:
    count = merge_spec_files(inputs, output)
    log.info("merged %d shard(s) into %s: %d specs", len(inputs), output, count)
    return count


def write_balance(
    specs_path: str | Path,
    json_path: str | Path,
    markdown_path: str | Path,
    taxonomy_path: str | Path | None = None,
) -> dict[str, Any]:
    """Balance scores and per-axis counts of a spec file, as JSON and Markdown."""
    taxonomy = load_taxonomy(taxonomy_path)
    report = balance_report(read_specs(specs_path), taxonomy)
    write_json(json_path, report)
    write_text(markdown_path, render_markdown(report))
    scores = ", ".join(f"{axis} {body['balance']:.4f}" for axis, body in report["axes"].items())
    log.info("balance over %d specs: %s", report["n_specs"], scores)
    return report
