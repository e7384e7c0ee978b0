"""Prompt-cache breakpoints for Anthropic Messages requests.

Anthropic caches nothing unless a request marks where cached prefixes end (`cache_control`
on a block, at most four per request); it then reads the longest prefix a previous request
wrote, checking each breakpoint and up to 20 blocks before it. The prefix runs in the order
tools, system, messages. Four breakpoints, each for a reason:

- the last tool: agents with the same tools share it even when their system prompts differ;
- the system prompt: sibling sub-agents of one definition share tools and system;
- the end of the latest turn: this request writes its whole prefix for the next one;
- the end of the turn two before it (the previous request's last turn): the next request reads
  what the previous one wrote even when a turn added more than 20 blocks (many tool results).
"""

from __future__ import annotations

from typing import Any, Literal

CacheTTL = Literal["5m", "1h"]
MAX_BREAKPOINTS = 4


def mark_cache_breakpoints(body: dict[str, Any], ttl: CacheTTL = "5m") -> dict[str, Any]:
    """`body` with `cache_control` breakpoints added (a new dict; `body` is not changed)."""
    marker: dict[str, Any] = (
        {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    )
    marked = dict(body)
    places = 0
    tools = marked.get("tools")
    if tools:
        marked["tools"] = [*tools[:-1], {**tools[-1], "cache_control": marker}]
        places += 1
    system = marked.get("system")
    if isinstance(system, str) and system:
        marked["system"] = [{"type": "text", "text": system, "cache_control": marker}]
        places += 1
    turns = list(marked.get("messages") or [])
    for index in _turns_to_mark(turns)[: MAX_BREAKPOINTS - places]:
        blocks = list(turns[index]["content"])
        blocks[-1] = {**blocks[-1], "cache_control": marker}
        turns[index] = {**turns[index], "content": blocks}
    marked["messages"] = turns
    return marked


def _turns_to_mark(turns: list[dict[str, Any]]) -> list[int]:
    """The latest turn and the one two before it (the previous request's last), newest first."""
    marked = [i for i in (len(turns) - 1, len(turns) - 3) if i >= 0]
    return [i for i in marked if isinstance(turns[i].get("content"), list) and turns[i]["content"]]
