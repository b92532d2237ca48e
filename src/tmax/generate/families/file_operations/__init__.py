"""Task families of the file_operations domain, one folder each, shaped like the Harbor
task it renders (``instruction.md``, ``solution/``, ``tests/``; tmax.generate.templates):
:mod:`duplicate_files` (duplicate photos by content, and their clean-up),
:mod:`fixed_width` (a mainframe's fixed-width exports to CSV), :mod:`archive_guard`
(screening uploaded tar archives before extraction) and :mod:`encoding_fix` (vendor text
files in legacy encodings to clean UTF-8). Reference code is written once as plain
functions in each family's module and pasted into its tests and Python reference
programs. They register in this order, which decides which family renders a spec (the
families of :mod:`tmax.generate.families.file_operations_more` register after them)."""

from tmax.generate.families.file_operations import (  # noqa: F401, I001  (registers them, in this order)
    duplicate_files,
    fixed_width,
    archive_guard,
    encoding_fix,
)
