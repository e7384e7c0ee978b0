"""Reading a trace back: its events, and every conversation rebuilt from them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..messages import Message
from .writer import Event


def read_trace(path: str | Path) -> list[Event]:
    """All events of a trace file; a torn last line (from a crash) is skipped."""
    return list(iter_trace(path))


def iter_trace(path: str | Path) -> Iterator[Event]:
    with Path(path).open(encoding="utf-8") as lines:
        for line in lines:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def rebuild_conversations(source: str | Path | Iterable[Event]) -> dict[str, list[Message]]:
    """Every agent's conversation, rebuilt from the trace alone.

    Keys are agent paths; when one path ran more than once in the trace, later runs are keyed
    `path#2`, `path#3`, and so on.
    """
    events = iter_trace(source) if isinstance(source, str | Path) else source
    conversations: dict[str, list[Message]] = {}
    current: dict[str, str] = {}
    for event in events:
        agent = event["agent"]
        if event["type"] == "run_start":
            key = agent
            runs = 1
            while key in conversations:
                runs += 1
                key = f"{agent}#{runs}"
            current[agent] = key
            conversations[key] = []
        elif event["type"] == "message":
            key = current.setdefault(agent, agent)
            conversations.setdefault(key, []).append(Message.model_validate(event["message"]))
    return conversations
