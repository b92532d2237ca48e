"""Data files of the evaluation stage (benchmark registry, SWE-bench repository facts,
task templates). ``swe_bench_grade.py`` is shipped into converted tasks and run there;
this file only makes it package data."""
