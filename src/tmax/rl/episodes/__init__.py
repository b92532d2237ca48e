"""Where the trainer's groups come from: the task pool (pool), the environments
(environments) and one episode token in / token out (rollout)."""
