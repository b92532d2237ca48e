"""Agent harnesses: tmax, terminus-2, mini-swe-agent and openhands over one sandbox.

harness = make_harness("tmax", HarnessSettings(max_tool_calls=64))
run = run_agent(harness, model, sandbox, instruction)   # then sandbox.verify(tests)
"""

from __future__ import annotations

from importlib import import_module

from tmax.harness.base import AgentRun, Harness, HarnessSettings, run_agent

HARNESSES: dict[str, str] = {
    "tmax": "tmax.harness.tmax:TmaxHarness",
    "terminus-2": "tmax.harness.terminus2:Terminus2Harness",
    "mini-swe-agent": "tmax.harness.mini_swe_agent:MiniSweAgentHarness",
    "openhands": "tmax.harness.openhands:OpenHandsHarness",
}
"""Harness name (as in the config) → implementing class."""


def harness_class(name: str) -> type[Harness]:
    if name not in HARNESSES:
        raise ValueError(f"unknown harness {name!r}; choose one of {', '.join(HARNESSES)}")
    module, _, attribute = HARNESSES[name].partition(":")
    cls: type[Harness] = getattr(import_module(module), attribute)
    return cls


def make_harness(name: str, settings: HarnessSettings | None = None) -> Harness:
    """A fresh harness instance (harnesses keep per-episode state: one per trial)."""
    return harness_class(name)(settings)


__all__ = [
    "HARNESSES",
    "AgentRun",
    "Harness",
    "HarnessSettings",
    "harness_class",
    "make_harness",
    "run_agent",
]
