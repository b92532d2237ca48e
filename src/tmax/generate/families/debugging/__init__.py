"""Task families of the debugging domain, one template folder each: ``fix_ranking/``
(a leaderboard script with planted bugs), ``crash_triage/`` (which job files crash a
stripped binary, and how), ``fix_validator/`` (a leaky account-record validator
replaced, optionally as a service) and ``bisect_regression/`` (the release of a tool
that introduced a regression). Helpers several of them use are in ``_shared.py``."""

# The order of registration breaks ties between families: keep it (registers them).
# isort: off
from tmax.generate.families.debugging import (
    fix_ranking,  # noqa: F401
    crash_triage,  # noqa: F401
    fix_validator,  # noqa: F401
    bisect_regression,  # noqa: F401
)
# isort: on
