"""Where the run's processes sit and how they talk: the memory plan (plan), the ranks
across a Slurm allocation (ranks) and what the ranks say to each other (collective)."""
