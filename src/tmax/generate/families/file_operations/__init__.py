"""Task families of the file_operations domain, one folder each, shaped like the Harbor
task it renders (``instruction.md``, ``solution/``, ``tests/``; tmax.generate.templates):
:mod:`duplicate_files` (duplicate photos by content, and their clean-up),
:mod:`fixed_width` (a mainframe's fixed-width exports to CSV), :mod:`archive_guard`
(screening uploaded tar archives before extraction), :mod:`encoding_fix` (vendor text
files in legacy encodings to clean UTF-8), :mod:`batch_normalize` (legacy CSV exports to
clean UTF-8/LF copies), :mod:`dupe_hunt` (groups of byte-identical files, hard-linked by
level), :mod:`archive_audit` (delivered archives checked against a sha256 manifest) and
:mod:`inbox_sorter` (an inbox filed into category/year folders, with a live index
service). Reference code is written once as plain functions in each family's module and
pasted into its tests and Python reference programs; what the last four share is in
``_shared.py``. They register in this order, which decides which family renders a spec."""

from tmax.generate.families.file_operations import (  # noqa: F401, I001  (registers them, in this order)
    duplicate_files,
    fixed_width,
    archive_guard,
    encoding_fix,
    batch_normalize,
    dupe_hunt,
    archive_audit,
    inbox_sorter,
)
