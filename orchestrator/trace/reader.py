"""Reading a trace back: its events, and every conversation rebuilt from them.

Lines are read as bytes and kept only when they are events: a line cut inside a UTF-8
character, a line that is not JSON, and JSON that is not an event (see `events.is_event`) are
skipped and counted (`TraceReader.skipped`, `TraceEvents.skipped`), so a trace torn by a crash,
or with garbage appended, still reads cleanly.

An event is also checked for its shape when it is read (`shape_problem`): the fields the
readers use (`trace show`, `trace list`, `report`, resuming) must have the type the writer
gives them (`usage` an object of counts, `tasks` a list of task objects, `status` text, ...).
An event that breaks this (a trace edited by hand, or written by something hostile) is
skipped too, and named with its line number in `problems`, so everything downstream can
trust the fields it reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from ..messages import Message
from ..security.signing import Signature, user_key, verify_lines
from .events import Event, is_event

MAX_PROBLEMS = 20
"""How many skipped lines are named in `problems` (the rest are only counted)."""

_NUMBER = (int, float)
_COMMON: dict[str, type | tuple[type, ...]] = {"ts": _NUMBER, "run": str, "attempt": int}
# The type of each field an event type's readers use; None (or absent) is always allowed
# unless the field is in `_REQUIRED`.
_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "job_start": {"name": str, "steps": int, "inputs": dict},
    "job_end": {"status": str, "usage": dict, "cost": _NUMBER, "error": str},
    "fork": {"tasks": list, "background": bool},
    "task_start": {"id": str, "depends_on": list},
    "task_end": {
        "id": str,
        "status": str,
        "reason": str,
        "restored": bool,
        "background": bool,
        "overlap_s": _NUMBER,
    },
    "background_settle": {"choice": str, "ids": list, "reason": str},
    "background_cancel": {"ids": list},
    "background_delivered": {"ids": list, "via": str},
    "run_start": {"resumed": bool, "kept": int, "model": str, "task": str, "preloaded": list},
    "run_end": {"status": str, "usage": dict, "steps": int, "cost": _NUMBER, "error": str},
    "model_call": {
        "usage": dict,
        "step": int,
        "cost": _NUMBER,
        "duration_ms": _NUMBER,
        "model": str,
        "finish_reason": str,
        "tools": list,
        "tools_digest": str,
    },
    "model_error": {"step": int, "duration_ms": _NUMBER, "error": str, "cancelled": bool},
    "tool_start": {"call_id": str, "name": str, "args": dict},
    "tool_end": {"call_id": str, "name": str, "error_type": str},
    "message": {"message": dict},
    "skill_loaded": {"skill": str, "tools": list},
    "context_window": {"tokens": int, "source": str},
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "fork": ("tasks",),
    "task_end": ("status",),
    "run_start": ("ts",),
    "run_end": ("status", "ts"),
    "model_call": ("usage", "step", "ts"),
    "model_error": ("ts",),
    "tool_start": ("ts",),
    "tool_end": ("ts",),
    "message": ("message", "ts"),
    "skill_loaded": ("skill",),
    "background_settle": ("choice", "ids"),
    "background_delivered": ("ids",),
}
_MESSAGE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "role": str,
    "content": str,
    "tool_calls": list,
    "tool_call_id": str,
    "name": str,
    "is_error": bool,
    "error_type": str,
}
_TOKEN_COUNTS = ("input_tokens", "output_tokens", "total_tokens")
_TYPE_NAMES = {
    str: "text",
    int: "an integer",
    dict: "an object",
    list: "a list",
    bool: "true/false",
}


class TraceReader:
    """The events of a trace file, read lazily; `skipped` counts the lines that were not
    events, or events of the wrong shape (so far, while iterating), and `problems` names the
    first `MAX_PROBLEMS` of those by line number."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.skipped = 0
        self.problems: list[str] = []

    def __iter__(self) -> Iterator[Event]:
        self.skipped = 0
        self.problems = []
        with self.path.open("rb") as lines:
            for number, raw in enumerate(lines, start=1):
                if not raw.strip():
                    continue
                event = _parse(raw)
                problem = "not an event" if event is None else shape_problem(event)
                if problem is None and event is not None:
                    yield event
                    continue
                self.skipped += 1
                if len(self.problems) < MAX_PROBLEMS:
                    self.problems.append(f"line {number}: {problem}")


class TraceEvents(list[Event]):
    """A trace's events in file order, how many lines were skipped, and why (`problems`)."""

    skipped: int = 0
    problems: list[str] = []


def read_trace(path: str | Path) -> TraceEvents:
    """All events of a trace file; lines that are not events of the right shape are skipped
    (`.skipped`, `.problems`)."""
    reader = TraceReader(path)
    events = TraceEvents(reader)
    events.skipped = reader.skipped
    events.problems = reader.problems
    return events


def shape_problem(event: Event) -> str | None:
    """What is wrong with an event's fields (as its readers use them), or None."""
    kind = event["type"]
    expected = {**_COMMON, **_FIELDS.get(kind, {})}
    for name in _REQUIRED.get(kind, ()):
        if event.get(name) is None:
            return f"a {kind} event without {name!r}"
    for name, types in expected.items():
        problem = _wrong_type(event.get(name), types)
        if problem:
            return f"a {kind} event whose {name!r} is {problem}"
    return _nested_problem(kind, event)


def _wrong_type(value: object, types: type | tuple[type, ...]) -> str | None:
    """None when `value` is None or of `types` (booleans are not numbers), else what it is."""
    if value is None:
        return None
    allowed = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool) and bool not in allowed:
        return "true/false"
    if isinstance(value, allowed):
        return None
    wanted = " or ".join(_TYPE_NAMES.get(t, "a number") for t in allowed if t is not float)
    return f"{type(value).__name__}, not {wanted}"


def _nested_problem(kind: str, event: Event) -> str | None:
    """The parts inside an event that readers use: usage counts, fork tasks, a message."""
    usage = event.get("usage")
    if isinstance(usage, dict) and any(_wrong_type(n, _NUMBER) for n in usage.values()):
        return f"a {kind} event whose usage holds something that is not a count"
    counted = isinstance(usage, dict) and all(isinstance(usage.get(n), int) for n in _TOKEN_COUNTS)
    if kind == "model_call" and not counted:
        return f"a {kind} event whose usage lacks a token count"
    tasks, tools, ids = event.get("tasks"), event.get("tools"), event.get("ids")
    if isinstance(ids, list) and not all(isinstance(i, str) for i in ids):
        return f"a {kind} event whose 'ids' are not all task ids"
    if isinstance(tasks, list) and not all(_task_is_sound(task) for task in tasks):
        return f"a {kind} event with a task that is not an object with a path, id and depends_on"
    if isinstance(tools, list) and not all(isinstance(tool, str) for tool in tools):
        return f"a {kind} event whose 'tools' are not all names"
    message = event.get("message")
    if isinstance(message, dict):
        problem = _message_problem(message)
        return f"a {kind} event whose message {problem}" if problem else None
    return None


def _task_is_sound(task: object) -> bool:
    if not isinstance(task, dict) or not isinstance(task.get("path"), str):
        return False
    depends = task.get("depends_on")
    return (
        isinstance(depends, list)
        and all(isinstance(d, str) for d in depends)
        and not _wrong_type(task.get("id"), (str, int))
        and not _wrong_type(task.get("agent"), str)
    )


def _message_problem(message: dict[str, object]) -> str | None:
    if not isinstance(message.get("role"), str):
        return "has no role"
    for name, types in _MESSAGE_FIELDS.items():
        if _wrong_type(message.get(name), types):
            return f"{name!r} is of the wrong type"
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(call, dict) for call in calls):
        return "has a tool call that is not an object"
    return None


def iter_trace(path: str | Path) -> TraceReader:
    """The events of a trace file, one at a time (iterate the result; it counts `skipped`)."""
    return TraceReader(path)


def verify_trace(path: str | Path, key: bytes | None = None) -> Signature:
    """Whether every event of the trace at `path` carries a good signature under `key` (the
    user's own by default): only then did the user's own runs write it (security/signing.py).
    Raises TraceKeyRefused when the user's key is open to other users: it proves nothing."""
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


def apply_compaction(messages: list[Message], event: Event) -> dict[int, str]:
    """Replace, in `messages`, the tool results a `compact` event names by their stubs; the
    texts replaced, by index. An entry that does not name a tool result of that call is
    skipped: the event and the conversation disagree."""
    originals: dict[int, str] = {}
    for entry in event.get("replaced") or []:
        if not isinstance(entry, dict):
            continue
        index, stub = entry.get("index"), entry.get("stub")
        if not (isinstance(index, int) and isinstance(stub, str) and 0 <= index < len(messages)):
            continue
        message = messages[index]
        if message.role != "tool" or message.tool_call_id != entry.get("call_id"):
            continue
        originals[index] = message.content or ""
        messages[index] = message.model_copy(update={"content": stub})
    return originals


def rebuild_conversations(source: str | Path | Iterable[Event]) -> dict[str, list[Message]]:
    """Every agent's conversation, rebuilt from the trace alone.

    Keys are agent paths; when one path ran more than once in the trace, later runs are keyed
    `path#2`, `path#3`, and so on. A run resumed from an earlier attempt (its `run_start` has
    `resumed`) goes on in the same conversation: the first `kept` messages of it stay, and
    what the resumed attempt appends follows them. A `compact` event replaces the tool results
    it names with their stubs, as the agent's later requests had them.
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
            try:
                message = Message.model_validate(event["message"])
            except ValidationError:
                continue  # a message no model could have sent: not part of the conversation
            key = current.setdefault(agent, agent)
            conversations.setdefault(key, []).append(message)
        elif event["type"] == "compact" and agent in current:
            apply_compaction(conversations[current[agent]], event)
    return conversations
