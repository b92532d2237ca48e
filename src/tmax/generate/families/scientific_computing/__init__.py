"""Task families of the scientific_computing domain, one folder each, shaped like the
Harbor task it renders (``instruction.md``, ``solution/``, ``tests/``;
tmax.generate.templates): :mod:`tone_analysis` (statistics or frequency estimates of
recorded test tones), :mod:`logistic_rk4` (logistic growth integrated with RK4, optionally
served over HTTP), :mod:`fasta_records` (FASTA record tables, or a FASTA validator) and
:mod:`star_field` (star centroids in telescope PNG frames). They register in this order,
which decides which family renders a spec."""

from tmax.generate.families.scientific_computing import (  # noqa: F401, I001  (registers them, in this order)
    tone_analysis,
    logistic_rk4,
    fasta_records,
    star_field,
)
