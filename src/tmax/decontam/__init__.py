"""Decontamination: exact word n-gram overlap between generated tasks and benchmarks."""
