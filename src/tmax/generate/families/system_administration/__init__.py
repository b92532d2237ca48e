"""Task families of the system_administration domain, one folder each, shaped like the
Harbor task it renders (``instruction.md``, ``solution/``, ``tests/``;
tmax.generate.templates): :mod:`auth_failures` (SSH brute-force sources from auth logs),
:mod:`health_service` (a status report of health-check logs, served on two protocols),
:mod:`cron_lint` (invalid crontab lines) and :mod:`backup_rotation` (a retention policy
applied to nightly backups). They register in this order, which decides which family
renders a spec."""

from tmax.generate.families.system_administration import (  # noqa: F401, I001  (registers them, in this order)
    auth_failures,
    health_service,
    cron_lint,
    backup_rotation,
)
