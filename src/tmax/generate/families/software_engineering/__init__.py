"""Task families of the software_engineering domain, one template folder each.

Families here ask for real programs: replaying a key-value journal (and serving the
result over a line protocol and HTTP, ``kv_journal/``), ordering a monorepo's builds
(``build_order/``), exact rational arithmetic (``rational_calc/``), and semantic-version
resolution with a vendored library (``semver_pick/``). Reference code is written once as
plain functions in each family's module and pasted into tests and Python reference
programs; the task plumbing (test head, service frame, solution lines) comes from
:mod:`tmax.generate.builders`.
"""

from tmax.generate.families.software_engineering import (  # noqa: F401, I001  (registers them, in this order)
    kv_journal,
    build_order,
    rational_calc,
    semver_pick,
)
