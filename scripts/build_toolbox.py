"""Snakemake entry: build (or find cached) the read-only verifier toolbox."""

import sys
from pathlib import Path

# src/ on the path, so the script also runs in a bare conda env (--sdm conda).
sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from tmax.logs import setup_logging
from tmax.sandbox.stage import write_toolbox_manifest

setup_logging(snakemake.log[0])
write_toolbox_manifest(snakemake.output[0])
