"""Snakemake entry: provenance of every table and figure (commit, config, packages)."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

import yaml

from tmax.io import write_json, write_text
from tmax.logs import setup_logging
from tmax.report.provenance import provenance

setup_logging(snakemake.log[0])
record = provenance(
    snakemake.config,
    root=Path(snakemake.scriptdir).parent,
    results=[Path(p) for p in snakemake.input.results],
    inputs=[Path(p) for p in snakemake.input.inputs],
)
write_json(snakemake.output.json, record)
write_text(snakemake.output.config, yaml.safe_dump(snakemake.config, sort_keys=False))
