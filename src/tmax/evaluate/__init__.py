"""Evaluation: benchmarks as task sets, trials, the runner and metrics."""
