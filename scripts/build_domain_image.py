"""Snakemake entry: one domain's base image from its definition."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.logs import setup_logging
from tmax.sandbox.stage import write_domain_manifest

setup_logging(snakemake.log[0])
write_domain_manifest(snakemake.wildcards.domain, snakemake.output[0], snakemake.params.backend)
