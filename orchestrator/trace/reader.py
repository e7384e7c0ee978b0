"""Reading a trace back: its events, and every conversation rebuilt from them.

Lines are read as bytes and kept only when they are events: a line cut inside a UTF-8
character, a line that is not JSON, and JSON that is not an event (see `events.is_event`) are
skipped and counted (`TraceReader.skipped`, `TraceEvents.skipped`), so a trace torn by a crash,
or with garbage appended, still reads cleanly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..messages import Message
from ..security.signing import Signature, user_key, verify_lines
from .events import Event, is_event


class TraceReader:
    """The events of a trace file, read lazily; `skipped` counts the lines that were not
    events (so far, while iterating)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.skipped = 0

    def __iter__(self) -> Iterator[Event]:
        self.skipped = 0
        with self.path.open("rb") as lines:
            for raw in lines:
                if not raw.strip():
                    continue
                event = _parse(raw)
                if event is None:
                    self.skipped += 1
                else:
                    yield event


class TraceEvents(list[Event]):
    """A trace's events in file order, and how many unreadable lines were skipped."""

    skipped: int = 0


def read_trace(path: str | Path) -> TraceEvents:
    """All events of a trace file; lines that are not events are skipped (`.skipped`)."""
    reader = TraceReader(path)
    events = TraceEvents(reader)
    events.skipped = reader.skipped
    return events


def iter_trace(path: str | Path) -> TraceReader:
    """The events of a trace file, one at a time (iterate the result; it counts `skipped`)."""
    return TraceReader(path)


def verify_trace(path: str | Path, key: bytes | None = None) -> Signature:
    """Whether every event of the trace at `path` carries a good signature under `key` (the
    user's own by default): only then did the user's own runs write it (security/signing.py)."""
    with Path(path).open("rb") as lines:
        return verify_lines(
            lines, key if key is not None else user_key(), is_event=lambda raw: bool(_parse(raw))
        )


def _parse(raw: bytes) -> Event | None:
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if is_event(value) else None


def rebuild_conversations(source: str | Path | Iterable[Event]) -> dict[str, list[Message]]:
    """Every agent's conversation, rebuilt from the trace alone.

    Keys are agent paths; when one path ran more than once in the trace, later runs are keyed
    `path#2`, `path#3`, and so on. A run resumed from an earlier attempt (its `run_start` has
    `resumed`) goes on in the same conversation: the first `kept` messages of it stay, and
    what the resumed attempt appends follows them.
    """
    events = iter_trace(source) if isinstance(source, str | Path) else source
    conversations: dict[str, list[Message]] = {}
    current: dict[str, str] = {}
    for event in events:
        agent = event["agent"]
        if event["type"] == "run_start":
            if event.get("resumed") and agent in current:
                key = current[agent]
                del conversations[key][event.get("kept", len(conversations[key])) :]
                continue
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
