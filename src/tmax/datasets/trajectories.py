"""Trajectory-only sources (Nemotron-Terminal's corpus: chat trajectories, Terminus-2
style, in Parquet/JSONL rows). They ship no environments, so nothing can be run: each
task is only its instruction, the first user message of a trajectory, which serves
the balance columns of the dataset comparison (``has_environments: false``).

A Terminus-2 first message wraps the instruction in the harness's prompt; the text
between ``Task Description:`` and ``Current terminal state:`` is the instruction.
Several trajectories of one task (same id, or the same instruction where there is no
id column) count once.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from tmax.datasets.base import (
    ConvertContext,
    Converted,
    SourceTask,
    TaskSkipped,
    column,
    first_present,
    register,
)
from tmax.datasets.rows import UnreadableRow, read_rows

ID_COLUMNS = ("task_id", "instance_id", "id", "task_name")
MESSAGE_COLUMNS = ("conversations", "messages", "trajectory", "steps")
USER_ROLES = ("user", "human")
_TERMINUS = re.compile(r"Task Description:\s*(.*?)\s*(?:Current terminal state:|\Z)", re.S)


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "\n".join(part for part in parts if isinstance(part, str))
    return ""


def first_user_message(messages: Any) -> str:
    """The first user turn of a chat (OpenAI ``role``/``content``, ShareGPT
    ``from``/``value`` or ATIF ``source``/``message``), as text."""
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except json.JSONDecodeError:
            raise TaskSkipped("the messages column is not JSON", "malformed") from None
    if isinstance(messages, dict):  # an ATIF trajectory or {"messages": [...]}
        messages = messages.get("steps") or messages.get("messages")
    if not isinstance(messages, list):
        raise TaskSkipped("no list of messages", "malformed")
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role") or message.get("from") or message.get("source")
        if isinstance(role, str) and role.lower() in USER_ROLES:
            text = _text(message.get("content", message.get("value", message.get("message"))))
            if text.strip():
                return text
    raise TaskSkipped("no user message", "missing")


def instruction_of(text: str) -> str:
    """The task's instruction inside a first user message."""
    match = _TERMINUS.search(text)
    instruction = match.group(1) if match and match.group(1).strip() else text
    return instruction.strip() + "\n"


@register("trajectories")
class TrajectoriesAdapter:
    """Instructions of trajectory-only datasets (no environments)."""

    layout = "trajectories"
    has_environments = False

    def list_tasks(self, context: ConvertContext) -> list[SourceTask]:
        items: dict[str, SourceTask] = {}
        for index, row in enumerate(read_rows(context)):
            try:
                if isinstance(row, UnreadableRow):
                    raise TaskSkipped(row.reason, "malformed")
                instruction = self._instruction(row, context)
            except TaskSkipped as why:
                items.setdefault(f"row-{index}", SourceTask(f"row-{index}", why))
                continue
            found = first_present(row, column(context.columns, "id", ID_COLUMNS))
            if found is not None and row[found] not in (None, ""):
                original_id = str(row[found])
            else:
                digest = hashlib.sha256(instruction.encode("utf-8")).hexdigest()[:12]
                original_id = f"instruction-{digest}"
            items.setdefault(original_id, SourceTask(original_id, instruction))
        return list(items.values())

    def _instruction(self, row: dict[str, Any], context: ConvertContext) -> str:
        direct = first_present(row, column(context.columns, "instruction", ("instruction",)))
        if direct is not None and isinstance(row[direct], str) and row[direct].strip():
            return row[direct].strip() + "\n"
        found = first_present(row, column(context.columns, "messages", MESSAGE_COLUMNS))
        if found is None:
            raise TaskSkipped("no messages column", "missing")
        return instruction_of(first_user_message(row[found]))

    def convert(self, item: SourceTask, context: ConvertContext) -> Converted:
        return Converted(str(item.ref))
