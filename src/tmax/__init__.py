"""tmax-repro: the TMAX recipe for terminal agents as one Snakemake workflow.

Stages, in the order data flows through them (a later stage may import an
earlier one, never the reverse): ``taxonomy`` → ``tasks`` → ``generate`` →
``sandbox`` → ``decontam`` → ``harness`` → ``rl`` → ``evaluate`` → ``report``.
"""

__version__ = "0.1.0"
