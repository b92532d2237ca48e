"""Snakemake entry: the paper's figures (training curves, ablations, data overviews) and
the training curves as a tidy table."""

import json
import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.logs import setup_logging
from tmax.report.figures import read_chosen_steps, read_curves, write_figures
from tmax.report.tidy import write_training

setup_logging(snakemake.log[0])
tasks_report = json.loads(Path(snakemake.input.tasks).read_text())
curves = read_curves(dict(zip(snakemake.params.models, snakemake.input.curves, strict=True)))
write_training(Path(snakemake.output.training), curves, snakemake.params.rl)
write_figures(
    Path(snakemake.output[0]).parent,  # every figure is written beside the first
    curves=curves,
    rl_settings=snakemake.params.rl,
    domain_counts=tasks_report.get("axes", {}).get("domain"),
    domain_balance=tasks_report.get("balance", {}).get("domain"),
    decontam_report=json.loads(Path(snakemake.input.decontam).read_text()),
    chosen_steps=read_chosen_steps(
        dict(zip(snakemake.params.models, snakemake.input.selections, strict=True))
    ),
)
