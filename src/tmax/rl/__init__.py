"""Reinforcement learning on terminal tasks: DPPO (the paper's recipe) and the GRPO baseline."""
