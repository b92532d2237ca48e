"""Snakemake entry: the decontamination report over every configured n."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.decontam.stage import merge_reports
from tmax.logs import setup_logging

setup_logging(snakemake.log[0])
merge_reports(
    [Path(p) for p in snakemake.input],
    Path(snakemake.output.json),
    Path(snakemake.output.markdown),
)
