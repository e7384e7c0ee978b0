"""`call_skill_tool`: one fixed tool through which a model calls the tools it was given later.

Provider prompt caches key on an exact prefix, and the tools array comes first in it: a tool
added to the array half-way through a run makes every later request miss the cache (Anthropic
caches tools, then system, then messages; OpenAI's cache needs the same prefix). So tools that
join an agent's run after its first request (a loaded skill's) are *callable, not advertised*:
their schemas reach the model in the observation that gave them, and the model calls them by
name, either directly or through this dispatcher, which is in the tools array from the start.

`arguments` is declared as JSON text, not an open object: servers that constrain a reply to
the tools' schemas (llama.cpp's grammars, strict modes) cannot bound an object of any shape,
and a model left to fill one may never stop. An object sent anyway is taken as it is.

A dispatched call is unwrapped into the call it stands for (same call id) before anything else
happens, so the inner tool's schema validates the arguments and its timeout, guards, approval
and trace events apply exactly as for a direct call.
"""

from __future__ import annotations

import json
from typing import Any

from ..messages import ToolCall
from .tools import Tool, Toolset

DISPATCH_TOOL = "call_skill_tool"


def call_skill_tool(tool: str, arguments: str = "{}") -> str:
    """Call a tool that a loaded skill gave you (its schema is in that skill's load_skill result).

    Args:
        tool: The tool's full name, e.g. pdf__extract_text.
        arguments: The tool's arguments as one JSON object.
    """
    raise RuntimeError("call_skill_tool is unwrapped by the tool batch and never runs itself")


_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool": {"type": "string", "description": "The tool's full name, e.g. pdf__extract_text."},
        "arguments": {
            "type": "string",
            "description": 'The tool\'s arguments as one JSON object, e.g. {"path": "a.txt"}.',
        },
    },
    "required": ["tool"],
}


def dispatcher() -> Tool:
    """The dispatcher tool, for an agent whose tools may grow during its run."""
    found = Tool(call_skill_tool)
    found.spec = found.spec.model_copy(update={"parameters": _PARAMETERS})
    return found


class Unwrapped:
    """A call as it will run: the inner call of a dispatched one, or the call itself; `error`
    says why a dispatched call cannot run (its result is then that error)."""

    __slots__ = ("call", "error")

    def __init__(self, call: ToolCall, error: str | None = None) -> None:
        self.call = call
        self.error = error


def unwrap(call: ToolCall, toolset: Toolset) -> Unwrapped:
    """The call a dispatcher call stands for; any other call as it is."""
    if call.name != DISPATCH_TOOL or DISPATCH_TOOL not in toolset:
        return Unwrapped(call)
    try:
        raw = json.loads(call.arguments) if call.arguments.strip() else {}
    except (ValueError, RecursionError):
        return Unwrapped(call, f"Invalid arguments for {DISPATCH_TOOL}: not valid JSON.")
    if not isinstance(raw, dict) or not isinstance(raw.get("tool"), str):
        return Unwrapped(call, f"{DISPATCH_TOOL} needs `tool`: the name of the tool to call.")
    name, arguments = raw["tool"], raw.get("arguments", {})
    if isinstance(arguments, str):  # some models send the arguments as JSON text
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            return Unwrapped(call, f"Invalid arguments for {name}: not valid JSON.")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return Unwrapped(call, f"Invalid arguments for {name}: `arguments` must be an object.")
    inner = ToolCall(id=call.id, name=name, arguments=json.dumps(arguments))
    if name == DISPATCH_TOOL:
        return Unwrapped(inner, f"{DISPATCH_TOOL} cannot call itself.")
    if toolset.advertised(name):
        return Unwrapped(inner, f"{name} is one of your tools: call it directly.")
    return Unwrapped(inner)


def target(call: ToolCall, toolset: Toolset) -> Tool | None:
    """The tool a call will run (through the dispatcher or not), or None if there is none."""
    unwrapped = unwrap(call, toolset)
    return None if unwrapped.error else toolset.get(unwrapped.call.name)
