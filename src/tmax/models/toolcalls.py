"""Reading a Qwen-style assistant text: reasoning, content and tool calls.

Used where the text of an answer is at hand rather than a server's parsed message:
RL rollouts (tmax.rl.episodes.rollout) and chat over a plain completions endpoint
(tmax.models.client.CompletionsChatModel). A malformed call is kept, with its raw
text as arguments, so the harness answers it with a format error, as vLLM's
tool parsers do.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    """One native tool call; ``arguments`` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; ``ValueError`` names what is wrong with them."""
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as error:
            raise ValueError(f"arguments of {self.name!r} are not valid JSON: {error}") from None
        if not isinstance(value, dict):
            raise ValueError(f"arguments of {self.name!r} must be a JSON object")
        return value

    def to_message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


_TOOL_CALL = re.compile(r"<tool_call>(.*?)(</tool_call>|\Z)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_XML_FUNCTION = re.compile(r"\s*<function=([^>\n]+)>(.*?)</function>\s*", re.DOTALL)
_XML_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", re.DOTALL)


def parse_completion(
    text: str, call_prefix: str = "call"
) -> tuple[str, str | None, list[ToolCall]]:
    """Split an assistant text into (content, reasoning, tool calls).

    Reasoning is what precedes ``</think>`` (a leading ``<think>`` dropped). A tool call
    is a Qwen3 block ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (or the
    Qwen3.5 XML form ``<tool_call><function=NAME><parameter=K>V</parameter>...``). A block
    that is neither, or is cut off before ``</tool_call>``, becomes a call whose
    ``arguments`` is the raw block text: the harness then answers with a format error.
    """
    reasoning: str | None = None
    if "</think>" in text:
        thought, _, text = text.partition("</think>")
        reasoning = thought.split("<think>", 1)[-1].strip("\n") or None
    calls: list[ToolCall] = []
    for index, match in enumerate(_TOOL_CALL.finditer(text)):
        body, closed = match.group(1), bool(match.group(2))
        call_id = f"{call_prefix}_{index}"
        calls.append(_tool_call(call_id, body) if closed else _malformed(call_id, body))
    content = _TOOL_CALL.sub("", text).strip()
    return content, reasoning, calls


def _malformed(call_id: str, body: str) -> ToolCall:
    name = _NAME.search(body) or re.search(r"<function=([^>\n]+)>", body)
    return ToolCall(call_id, name.group(1).strip() if name else "", body.strip())


def _tool_call(call_id: str, body: str) -> ToolCall:
    xml = _XML_FUNCTION.fullmatch(body)
    if xml:
        name, inner = xml.groups()
        parameters = dict(_XML_PARAMETER.findall(inner))
        return ToolCall(call_id, name.strip(), json.dumps(parameters, ensure_ascii=False))
    try:
        call = json.loads(body)
    except json.JSONDecodeError:
        return _malformed(call_id, body)
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return _malformed(call_id, body)
    arguments = call.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(call_id, call["name"], arguments)
