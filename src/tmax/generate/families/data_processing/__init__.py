"""Task families of the data_processing domain, one folder each, shaped like the Harbor
task it renders (``instruction.md``, ``solution/``, ``tests/``; tmax.generate.templates):
:mod:`customer_totals` (per-customer totals of payment exports), :mod:`signup_validator`
(valid and rejected sign-up records), :mod:`hourly_rollup` (hourly per-sensor aggregates
across UTC offsets) and :mod:`name_matching` (messy vendor names to a canonical list).
They register in this order, which decides which family renders a spec."""

from tmax.generate.families.data_processing import (  # noqa: F401, I001  (registers them, in this order)
    customer_totals,
    signup_validator,
    hourly_rollup,
    name_matching,
)
