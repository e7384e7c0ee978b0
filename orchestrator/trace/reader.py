"""Reading a trace back: its events, typed, and every conversation rebuilt from them.

Lines are read as bytes and kept only when they are events of a known kind and shape
(`orchestrator.events.parse_event`): a line cut inside a UTF-8 character, a line that is not
JSON, JSON that is not an event, an event of a kind this version does not know, and an event
whose fields have the wrong type (a trace edited by hand, or written by something hostile) are
skipped and counted (`TraceReader.skipped`, `TraceEvents.skipped`), and the first
`MAX_PROBLEMS` named with their line numbers in `problems`. So a trace torn by a crash, or with
garbage appended, still reads cleanly, and everything downstream can trust the fields it reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from ..events import (
    MAX_PROBLEMS,
    Compact,
    Event,
    MessageEvent,
    RunStart,
    TraceEvent,
    event_or_problem,
    is_event,
)
from ..messages import Message
from ..security.inputs import JsonInputError, load_json
from ..security.inventory import reads
from ..security.signing import Signature, user_key, verify_lines


class TraceReader:
    """The events of a trace file, read lazily; `skipped` counts the lines that were not
    events, or events of the wrong shape (so far, while iterating), and `problems` names the
    first `MAX_PROBLEMS` of those by line number."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.skipped = 0
        self.problems: list[str] = []

    @reads("trace")
    def __iter__(self) -> Iterator[TraceEvent]:
        self.skipped = 0
        self.problems = []
        with self.path.open("rb") as lines:
            for number, raw in enumerate(lines, start=1):
                if not raw.strip():
                    continue
                line = _parse(raw)
                event, problem = (None, "not an event") if line is None else event_or_problem(line)
                if event is not None:
                    yield event
                    continue
                self.skipped += 1
                if len(self.problems) < MAX_PROBLEMS:
                    self.problems.append(f"line {number}: {problem}")


class TraceEvents(list[TraceEvent]):
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


def iter_trace(path: str | Path) -> TraceReader:
    """The events of a trace file, one at a time (iterate the result; it counts `skipped`)."""
    return TraceReader(path)


@reads("trace")
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
        value = load_json(raw, "trace line")
    except JsonInputError:
        return None
    return value if is_event(value) else None


def apply_compaction(messages: list[Message], event: Compact) -> dict[int, str]:
    """Replace, in `messages`, the tool results a `compact` event names by their stubs; the
    texts replaced, by index. An entry that does not name a tool result of that call is
    skipped: the event and the conversation disagree."""
    originals: dict[int, str] = {}
    for entry in event.replaced or []:
        if not 0 <= entry.index < len(messages):
            continue
        message = messages[entry.index]
        if message.role != "tool" or message.tool_call_id != entry.call_id:
            continue
        originals[entry.index] = message.content or ""
        messages[entry.index] = message.as_stub(entry.stub)
    return originals


def rebuild_conversations(
    source: str | Path | Iterable[TraceEvent],
) -> dict[str, list[Message]]:
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
        agent = event.agent
        if isinstance(event, RunStart):
            if event.resumed and agent in current:
                key = current[agent]
                kept = event.kept if event.kept is not None else len(conversations[key])
                del conversations[key][kept:]
                continue
            key = agent
            runs = 1
            while key in conversations:
                runs += 1
                key = f"{agent}#{runs}"
            current[agent] = key
            conversations[key] = []
        elif isinstance(event, MessageEvent):
            key = current.setdefault(agent, agent)
            conversations.setdefault(key, []).append(event.message)
        elif isinstance(event, Compact) and agent in current:
            apply_compaction(conversations[current[agent]], event)
    return conversations
