"""A model that answers with the responses a trace recorded: `replay:TRACE`.

A run against a real provider records, for every agent, each request's conversation (its
`message` events) and each response (the assistant message and the `model_call` that made it).
`ReplayModel(trace)` answers every agent with those responses, matched by agent path and turn
(the request's turn is the number of assistant messages already in its conversation, so a
resumed replay picks up where it was). A request that departs from the recording (another
agent, a turn past the recorded ones, a conversation that differs from what was recorded up to
that turn, or a tools array that differs from the one recorded: another tool, or a changed
schema) raises `ReplayMismatch`, which names the agent, the turn and the first difference.
The recorded usage is reported as the provider's, so budgets and fork observations come out
the same as in the recorded run. An answer's text goes to the request's `on_text` whole, as the
scripted model does, so a streamed run (`run --stream`) shows it.

Tools whose output changes from run to run (a clock, a network call) are named `volatile`
(shell-style patterns, `weather__*`): their results are not compared with the recording,
whatever they hold now (the tool ran again; its new result stays in the conversation), and
each one taken so is kept in `accepted`. Everything else in the request is still compared.

A recording made in another folder replays here with `paths`, the recorded folders and where
they are now: each is replaced in the recorded messages (texts and tool-call arguments) before
they are compared and answered.

A recording of agents that compacted their conversations (docs/context-window.md) replays
with the window and threshold of its first `compact` event (`context_window`, `compact_at`),
and each turn is compared with the conversation as that request had it, stubs and all. A
window learned from a provider's refusal is not replayed (the replay refuses nothing), nor
are several windows in one recording: such runs depart from it at their first compaction.

The recording's lines are read here, each parsed with `orchestrator.events.parse_event` (the
same typed events every reader uses): models sit beside the trace package, not above it, so
they do not use its reader (docs/architecture.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from ..errors import ConfigError, ModelError
from ..events import Compact, MessageEvent, ModelCall, RunStart, TraceEvent, parse_event
from ..messages import Message, Usage, tools_digest
from ..security import SecretMask
from ..security.inputs import JsonInputError, load_json
from ..security.inventory import reads
from .base import Model, ModelRequest, ModelResponse
from .settings import WireOptions


class ReplayMismatch(ModelError):
    """A request the recording has no answer for."""


@dataclass
class RecordedTurn:
    """One response of the recording: the assistant message and what the call reported."""

    message: Message
    usage: Usage | None = None
    finish_reason: str | None = None
    extra: dict[str, object] = field(default_factory=dict)
    tools: list[str] | None = None
    """The names in the request's tools array, when the recording kept them."""
    tools_digest: str | None = None


@dataclass
class RecordedAgent:
    """One agent path of the recording: its conversation and its responses in order."""

    conversation: list[Message] = field(default_factory=list)
    turns: list[RecordedTurn] = field(default_factory=list)
    pending: ModelCall | None = None  # the last model_call, until its message comes
    sent: list[list[Message]] = field(default_factory=list)
    """The conversation each turn's request had, kept from the first compaction on."""
    compacted: bool = False

    def prefix(self, turn: int) -> list[Message]:
        """The conversation a request at `turn` (0-based) was sent."""
        if turn < len(self.sent):
            return self.sent[turn]
        seen = 0
        for index, message in enumerate(self.conversation):
            if message.role == "assistant":
                if seen == turn:
                    return self.conversation[:index]
                seen += 1
        return list(self.conversation)


class ReplayModel(Model):
    """Answers every agent with the responses recorded in a trace (see the module doc).

    `check=False` matches by agent path and turn alone, without comparing conversations.
    `paths` maps folders named in the recording to the folders that stand for them now.
    `volatile`: the tools (patterns) whose results are taken as they come, not compared.
    """

    def __init__(
        self,
        trace: str | Path,
        *,
        check: bool = True,
        name: str | None = None,
        paths: Mapping[str, str] | None = None,
        volatile: Sequence[str] = (),
    ) -> None:
        self.path = Path(trace)
        self.volatile = tuple(volatile)
        self.accepted: list[str] = []
        """Each volatile tool's result taken though it differs from the recording, once:
        `agent: tool`."""
        self._accepted_calls: set[str] = set()
        self.agents, first_compaction = load_recording(self.path, paths)
        window = first_compaction.window if first_compaction is not None else None
        self.options = WireOptions(
            context_window=window if window is not None and window > 0 else None,
            compact_at=first_compaction.compact_at if first_compaction is not None else None,
        )
        self.check = check
        self.name = name or f"replay:{self.path}"
        self.requests: list[ModelRequest] = []
        self._mask = SecretMask()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        agent = self.agents.get(request.agent)
        if agent is None or not agent.turns:
            known = ", ".join(sorted(a for a, r in self.agents.items() if r.turns)) or "none"
            raise ReplayMismatch(
                f"replay: the recording {self.path} has no responses for agent "
                f"{request.agent!r} (agents recorded: {known})"
            )
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn >= len(agent.turns):
            raise ReplayMismatch(
                f"replay: agent {request.agent!r} asked for turn {turn + 1}, but the recording "
                f"{self.path} has {len(agent.turns)}"
            )
        recorded = agent.turns[turn]
        if self.check:  # in the order providers read a request: tools, then messages
            self._compare_tools(request, recorded, turn)
            self._compare(request, agent.prefix(turn), turn)
        if not recorded.message.tool_calls:  # an answer: shown as it is "written" (--stream)
            request.text(recorded.message.content)
        return ModelResponse(
            message=recorded.message,
            usage=recorded.usage,
            finish_reason=recorded.finish_reason,
            extra=dict(recorded.extra),
        )

    def _compare(self, request: ModelRequest, recorded: list[Message], turn: int) -> None:
        sent = [self._masked(m) for m in request.messages]
        for index, (got, want) in enumerate(zip(sent, recorded, strict=False)):
            if got != want and not self._accepted(request.agent, got, want):
                raise ReplayMismatch(
                    f"replay: agent {request.agent!r}, turn {turn + 1}: message {index + 1} "
                    f"({want.role}) departs from the recording: {difference(want, got)}"
                )
        if len(sent) != len(recorded):
            raise ReplayMismatch(
                f"replay: agent {request.agent!r}, turn {turn + 1}: the request has "
                f"{len(sent)} messages, the recording {len(recorded)}"
            )

    def _accepted(self, agent: str, got: Message, want: Message) -> bool:
        """Whether `got` is a volatile tool's result where `want` was recorded: the same call
        answered, whatever it says now."""
        if want.role != "tool" or got.role != "tool" or want.name is None:
            return False
        same_call = (got.tool_call_id, got.name) == (want.tool_call_id, want.name)
        if not same_call or not any(fnmatchcase(want.name, p) for p in self.volatile):
            return False
        taken = f"{agent}: {want.name}"
        key = f"{taken} ({want.tool_call_id})"
        if key not in self._accepted_calls:
            self._accepted_calls.add(key)
            self.accepted.append(taken)
        return True

    def _compare_tools(self, request: ModelRequest, recorded: RecordedTurn, turn: int) -> None:
        if recorded.tools is None:
            return  # recorded before traces kept the tools array
        sent = [spec.name for spec in request.tools]
        where = f"replay: agent {request.agent!r}, turn {turn + 1}: the tools array"
        if sent != recorded.tools:
            added = [n for n in sent if n not in recorded.tools]
            gone = [n for n in recorded.tools if n not in sent]
            change = "; ".join(
                part
                for part in (
                    f"sent now but not recorded: {', '.join(added)}" if added else "",
                    f"recorded but not sent now: {', '.join(gone)}" if gone else "",
                )
                if part
            )
            raise ReplayMismatch(f"{where} differs from the recording ({change or 'reordered'})")
        if (
            recorded.tools_digest is not None
            and tools_digest(request.tools) != recorded.tools_digest
        ):
            raise ReplayMismatch(
                f"{where} has the recorded tools, but a description or parameter schema changed"
            )

    def _masked(self, message: Message) -> Message:
        """The message as the trace recorded it: secrets masked."""
        if not self._mask.secrets or not message.content:
            return message
        return message.model_copy(update={"content": self._mask(message.content)})


@reads("file a spec names")
def load_recording(
    path: Path, paths: Mapping[str, str] | None = None
) -> tuple[dict[str, RecordedAgent], Compact | None]:
    """Every agent's conversation and responses in a trace file, and its first `compact`
    event (None when there is none); `paths`: recorded folders and where they are now."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the recording {path}: {exc.strerror}") from None
    agents: dict[str, RecordedAgent] = {}
    moves = {old: new for old, new in (paths or {}).items() if old}
    first: Compact | None = None
    for line in raw.split(b"\n"):
        event = _event(line)
        if event is not None:
            _fold(agents.setdefault(event.agent, RecordedAgent()), event, moves)
            if isinstance(event, Compact) and first is None:
                first = event
    if not any(a.turns for a in agents.values()):
        raise ConfigError(f"the recording {path} has no model responses to replay")
    return agents, first


def _fold(agent: RecordedAgent, event: TraceEvent, moves: Mapping[str, str]) -> None:
    if isinstance(event, RunStart) and event.resumed:
        if event.kept is not None:
            del agent.conversation[event.kept :]
    elif isinstance(event, ModelCall):
        agent.pending = event
    elif isinstance(event, MessageEvent):
        message = _moved(event.message, moves)
        if message.role == "assistant" and agent.compacted:
            agent.sent.append(list(agent.conversation))
        agent.conversation.append(message)
        if message.role == "assistant":
            agent.turns.append(_turn(message, agent.pending))
            agent.pending = None
    elif isinstance(event, Compact):
        _compact(agent, event)


def _compact(agent: RecordedAgent, event: Compact) -> None:
    """Put a `compact` event's stubs in the conversation (as trace/reader.py does), keeping
    from the first one on the conversation each turn was sent."""
    if not agent.compacted:
        agent.sent = [agent.prefix(turn) for turn in range(len(agent.turns))]
        agent.compacted = True
    for entry in event.replaced or []:
        if 0 <= entry.index < len(agent.conversation):
            message = agent.conversation[entry.index]
            if message.role == "tool" and message.tool_call_id == entry.call_id:
                agent.conversation[entry.index] = message.as_stub(entry.stub)


def _moved(message: Message, moves: Mapping[str, str]) -> Message:
    """`message` with each recorded folder in its texts replaced by where it is now, in one
    pass, the longest first (a folder inside another moves with its own entry)."""
    if all(old == new for old, new in moves.items()):
        return message
    pattern = re.compile("|".join(re.escape(old) for old in sorted(moves, key=len, reverse=True)))

    def move(text: str) -> str:
        return pattern.sub(lambda match: moves[match[0]], text)

    calls = tuple(c.model_copy(update={"arguments": move(c.arguments)}) for c in message.tool_calls)
    content = move(message.content) if message.content else message.content
    return message.model_copy(update={"content": content, "tool_calls": calls})


def _turn(message: Message, call: ModelCall | None) -> RecordedTurn:
    if call is None:
        return RecordedTurn(message=message, extra={"model": None, "id": None})
    return RecordedTurn(
        message=message,
        usage=Usage.model_validate(call.usage.model_dump()),
        finish_reason=call.finish_reason,
        extra={"model": call.response_model, "id": call.response_id},
        tools=call.tools,
        tools_digest=call.tools_digest,
    )


def _event(line: bytes) -> TraceEvent | None:
    """The recording's event on `line`; None for a line that is none (torn, or garbage)."""
    try:
        value = load_json(line, "recording line")
    except JsonInputError:
        return None
    return parse_event(value) if isinstance(value, dict) else None


def difference(recorded: Message, sent: Message) -> str:
    """How `sent` differs from `recorded`, first difference first: the role, the calls, or
    the text around the first character that differs."""
    if recorded.role != sent.role:
        return f"recorded a {recorded.role} message, got a {sent.role} message"
    if recorded.tool_calls != sent.tool_calls:
        return f"recorded the calls {_calls(recorded)}, got {_calls(sent)}"
    want, got = recorded.content or "", sent.content or ""
    if want != got:
        at = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), None)
        at = min(len(want), len(got)) if at is None else at
        start = max(0, at - 30)
        line = want.count("\n", 0, at) + 1
        return (
            f"its text differs from character {at + 1} (line {line}): recorded "
            f"{_excerpt(want, start)}, got {_excerpt(got, start)}"
        )
    return f"recorded {_show(recorded)}, got {_show(sent)}"


def _excerpt(text: str, start: int, width: int = 80) -> str:
    part = text[start : start + width]
    shown = json.dumps(part, ensure_ascii=False)
    return f"...{shown}" if start else shown


def _calls(message: Message) -> str:
    return ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls) or "none"


def _show(message: Message) -> str:
    text = json.dumps(message.to_dict(), ensure_ascii=False)
    return text if len(text) <= 200 else f"{text[:197]}..."
