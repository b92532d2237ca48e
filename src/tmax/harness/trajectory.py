"""Agent trajectories in Harbor's ATIF format (``agent/trajectory.json``).

Steps are numbered from 1; ``source`` is system, user or agent. An agent step holds
the model's message, its reasoning, its tool calls and, once the harness ran them,
their observations; ``metrics`` holds the step's token counts. Released Harbor jobs
and ours then read the same way.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tmax.io import write_json
from tmax.models.client import Completion

ATIF_VERSION = "ATIF-v1.6"


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class Trajectory:
    agent_name: str
    agent_version: str
    model_name: str
    extra: dict[str, Any] = field(default_factory=dict)
    session_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    steps: list[dict[str, Any]] = field(default_factory=list)

    def _step(self, source: str, message: str, **fields: Any) -> dict[str, Any]:
        step = {
            "step_id": len(self.steps) + 1,
            "timestamp": now_iso(),
            "source": source,
            "message": message,
        }
        step.update({key: value for key, value in fields.items() if value is not None})
        self.steps.append(step)
        return step

    def system(self, message: str) -> None:
        self._step("system", message)

    def user(self, message: str) -> None:
        self._step("user", message)

    def agent(self, completion: Completion) -> dict[str, Any]:
        """Record a model turn; the harness adds observations with ``observe``."""
        calls = []
        for call in completion.tool_calls:
            try:
                arguments: Any = json.loads(call.arguments or "{}")
            except json.JSONDecodeError:
                arguments = {"_raw": call.arguments}
            calls.append(
                {"tool_call_id": call.id, "function_name": call.name, "arguments": arguments}
            )
        return self._step(
            "agent",
            completion.content,
            model_name=self.model_name,
            reasoning_content=completion.reasoning,
            tool_calls=calls or None,
            metrics={
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
            },
        )

    def observe(self, content: str, call_id: str | None = None) -> None:
        """Attach an observation to the latest agent step."""
        step = next((s for s in reversed(self.steps) if s["source"] == "agent"), None)
        if step is None:
            self.user(content)
            return
        results = step.setdefault("observation", {"results": []})["results"]
        result: dict[str, Any] = {"content": content}
        if call_id is not None:
            result["source_call_id"] = call_id
        results.append(result)

    def to_dict(self, final_metrics: dict[str, Any] | None = None) -> dict[str, Any]:
        agent_steps = [s for s in self.steps if s["source"] == "agent"]
        metrics = {
            "total_prompt_tokens": sum(s["metrics"]["prompt_tokens"] for s in agent_steps),
            "total_completion_tokens": sum(s["metrics"]["completion_tokens"] for s in agent_steps),
            "total_steps": len(self.steps),
        }
        if final_metrics:
            metrics["extra"] = final_metrics
        return {
            "schema_version": ATIF_VERSION,
            "session_id": self.session_id,
            "agent": {
                "name": self.agent_name,
                "version": self.agent_version,
                "model_name": self.model_name,
                "extra": self.extra,
            },
            "steps": self.steps,
            "final_metrics": metrics,
        }

    def write(self, path: Path, final_metrics: dict[str, Any] | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, self.to_dict(final_metrics))
