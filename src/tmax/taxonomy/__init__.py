"""The 9-axis task taxonomy, the spec sampler and the balance score (paper §3.1)."""

from tmax.taxonomy.balance import balance_report, balance_score, render_markdown
from tmax.taxonomy.model import Domain, SkillType, Taxonomy, TaxonomyError, load_taxonomy
from tmax.taxonomy.sampler import (
    AXES,
    SamplerError,
    SamplerSettings,
    TaskSpec,
    read_specs,
    sample_specs,
    shard_bounds,
    write_specs,
)

__all__ = [
    "AXES",
    "Domain",
    "SamplerError",
    "SamplerSettings",
    "SkillType",
    "TaskSpec",
    "Taxonomy",
    "TaxonomyError",
    "balance_report",
    "balance_score",
    "load_taxonomy",
    "read_specs",
    "render_markdown",
    "sample_specs",
    "shard_bounds",
    "write_specs",
]
