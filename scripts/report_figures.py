"""Snakemake entry: the paper's figures (training curves, ablations, data overviews)."""

import json
import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.logs import setup_logging
from tmax.report.figures import read_chosen_steps, read_curves, write_figures

setup_logging(snakemake.log[0])
tasks_report = json.loads(Path(snakemake.input.tasks).read_text())
write_figures(
    Path(snakemake.output[0]).parent,  # every figure is written beside the first
    curves=read_curves(dict(zip(snakemake.params.models, snakemake.input.curves, strict=True))),
    rl_settings=snakemake.params.rl,
    domain_counts=tasks_report.get("axes", {}).get("domain"),
    domain_balance=tasks_report.get("balance", {}).get("domain"),
    decontam_report=json.loads(Path(snakemake.input.decontam).read_text()),
    chosen_steps=read_chosen_steps(
        dict(zip(snakemake.params.models, snakemake.input.selections, strict=True))
    ),
)
