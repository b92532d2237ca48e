"""A Harbor agent that plays scripted commands (one of our red-team attacks) through the
environment, for tests/sandbox/test_harbor_environment.py. Imported by Harbor's
interpreter (``--agent tests.sandbox.harbor_attacker:ScriptedAgent``), so Harbor and the
standard library only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext


class ScriptedAgent(BaseAgent):
    """Runs, in order, the commands that ``--ak commands=FILE`` (JSON: task folder name
    to a list of commands) gives the task's folder."""

    def __init__(self, *args: Any, commands: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._plays: dict[str, list[str]] = json.loads(Path(commands).read_text())

    @staticmethod
    def name() -> str:
        return "tmax-scripted"

    def version(self) -> str:
        return "1"

    async def setup(self, environment: BaseEnvironment) -> None:
        pass

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        for command in self._plays[environment.environment_dir.parent.name]:
            await environment.exec(command, timeout_sec=30)
