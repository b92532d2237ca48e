"""More task families of the file_operations domain (kept apart from file_operations.py,
which another engineer may extend at the same time), one template folder each:
``batch_normalize/`` (legacy CSV exports to clean UTF-8/LF copies), ``dupe_hunt/``
(groups of byte-identical files, hard-linked by level), ``archive_audit/`` (delivered
archives checked against a sha256 manifest) and ``inbox_sorter/`` (an inbox filed into
category/year folders, with a live index service). Helpers several of them use are in
``_shared.py``."""

# The order of registration breaks ties between families: keep it (registers them).
# isort: off
from tmax.generate.families.file_operations_more import (
    batch_normalize,  # noqa: F401
    dupe_hunt,  # noqa: F401
    archive_audit,  # noqa: F401
    inbox_sorter,  # noqa: F401
)
# isort: on
