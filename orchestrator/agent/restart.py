"""Restarting an agent's run from its history (what the trace of a run cut off recorded).

An agent handed the history of its path (`AgentLoop.run(history=...)`, from
`Checkpoint.history`: its run was cut off there by a crash or `kill -9`, or cancelled by
Ctrl-C) does not start over: it restarts from its last complete turn. Its conversation is
rebuilt from the trace; its steps, usage, budget and repeat count go on from where they were;
its extensions get their state back (skills loaded, forks made); and the turn that was cut
gets the results it is missing:

- a call whose result was recorded keeps it;
- a resumable tool is called again: one that only reads (`load_skill`, `read_task_output`),
  or `fork`, which resumes itself from the trace;
- a call that waited for a person's answer (agent/waiting.py) is called again: it finds the
  answer given on resume, or waits again;
- a call that had started gets `aborted` (it may have had effects, so it is never silently
  repeated: the model sees that and decides), even if it ended and only its result was lost;
- a call that never started gets `skipped`.

A conversation that was compacted comes back compacted (the checkpoint applies the trace's
`compact` events), and what the stubs replaced can still be read back.

Orchestrator notes the loop adds again by itself (the last-step and budget notes) are dropped
from the end of the rebuilt conversation; `run_start` says how many messages were kept.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from ..events import RunStartFields, TokenCounts
from ..messages import Message, ToolCall, Usage
from ..trace import AgentHistory, AgentRecord
from .extension import Extension
from .tools import ToolContext, Toolset, target

ABORTED = (
    "Aborted: the run stopped while this call ran, and it was not run again; whatever it did "
    "before that may have happened."
)
LOST = (
    "Aborted: the run stopped before this call's result was recorded; the call may have "
    "finished (its effects may have happened), and it was not run again."
)
SKIPPED = "Skipped: the run stopped before this call started."
_CANCELLED = ("aborted", "skipped")
WAITED = "input_required"
"""The result type of a call that waited for a person: called again on resume."""


@dataclass
class CutTurn:
    """The last turn of a resumed run, as the earlier attempt left it.

    `calls` are the turn's calls from the first one without a result on; `known` holds, for
    each, the result to give it (recorded, or `aborted`/`skipped`), or None where the call is
    run again (a resumable tool such as `fork`). `final` is an answer the earlier attempt got
    but could not end the run with.
    """

    calls: list[ToolCall] = field(default_factory=list)
    known: list[Message | None] = field(default_factory=list)
    final: Message | None = None


@dataclass
class Restart:
    """Where a resumed run goes on from: the conversation kept, the spend so far, and the
    turn that was cut (None: it was complete)."""

    messages: list[Message]
    steps: int
    usage: Usage
    cost: float | None
    cut: CutTurn | None
    compacted: dict[int, str] = field(default_factory=dict)
    """What the earlier attempts' compactions cut, by message index (agent/compaction.py)."""
    server_window: tuple[int | None] | None = None
    """What the model's server said of its window in an earlier attempt (`(None,)`: it was
    asked and did not say); None when it was not asked. Asked again, it could answer
    otherwise, and the tools array would change mid-run."""

    def started(self) -> RunStartFields:
        """What the run's `run_start` event adds."""
        kept = len(self.messages)
        return {
            "resumed": True,
            "kept": kept,
            "steps": self.steps,
            "usage": TokenCounts.of(self.usage),
        }


def restart_from(
    history: AgentHistory,
    context: ToolContext,
    *,
    extensions: Iterable[Extension],
    notes: Collection[str],
    shared_budget: bool,
) -> Restart:
    """Where the agent whose cut-off run `history` holds goes on from. The extensions get
    their state back (in `context`).

    The run's own budget (`context.budget`) is charged what the path's subtree spent before,
    unless it is the shared budget (`shared_budget`), which counts the earlier attempts by
    itself.
    """
    record = history.record
    messages, _ = cut_turn(record, context.toolset, notes)
    for extension in extensions:
        extension.restore(context, history, messages)
    # Which calls of the cut turn run again depends on their tools, loaded skills' included:
    # so the cut turn is read once the extensions have given those tools back.
    _, cut = cut_turn(record, context.toolset, notes)
    if not shared_budget and context.budget is not None:
        context.budget.record_spent(*history.spent())
    compacted = {i: text for i, text in record.compacted.items() if i < len(messages)}
    asked = (record.server_window,) if record.asked_server else None
    return Restart(messages, record.steps, record.usage, record.cost, cut, compacted, asked)


def cut_turn(
    record: AgentRecord, toolset: Toolset, notes: Collection[str]
) -> tuple[list[Message], CutTurn | None]:
    """The messages to keep, and what the last turn still needs (None: it is complete)."""
    messages = list(record.messages)
    if not any(m.role == "user" for m in messages):
        return [], None  # cut off before its task was recorded: it starts again
    while messages and messages[-1].role == "user" and messages[-1].content in notes:
        messages.pop()
    last = next((i for i in reversed(range(len(messages))) if messages[i].role == "assistant"), -1)
    if last < 0:
        return messages, None
    turn = messages[last]
    if not turn.tool_calls:
        return messages, CutTurn(final=turn) if last == len(messages) - 1 else None
    results = [m for m in messages[last + 1 :] if m.role == "tool"]
    recorded = {m.tool_call_id: m for m in results}
    calls = list(turn.tool_calls)
    cut = next((j for j, c in enumerate(calls) if _again(c, recorded, toolset)), len(calls))
    if cut == len(calls):
        return messages, None
    in_order = all(j < len(results) and results[j].tool_call_id == calls[j].id for j in range(cut))
    if not in_order or len(messages) != last + 1 + len(results):
        missing = [c for c in calls if c.id not in recorded]  # keep all, answer the rest
        return messages, CutTurn(missing, [_answer(c, {}, toolset, record) for c in missing])
    rest = calls[cut:]
    known = [_answer(c, recorded, toolset, record) for c in rest]
    return messages[: last + 1 + cut], CutTurn(rest, known)


def _again(call: ToolCall, recorded: dict[str | None, Message], toolset: Toolset) -> bool:
    """The call needs something new: it has no result, or it is resumable and its result
    came from the cancellation that cut it short."""
    result = recorded.get(call.id)
    if result is None or result.error_type == WAITED:
        return True
    return _resumable(call, toolset) and result.error_type in _CANCELLED


def _answer(
    call: ToolCall, recorded: dict[str | None, Message], toolset: Toolset, record: AgentRecord
) -> Message | None:
    """The result a call of the cut turn gets, or None when it is called again."""
    if not _again(call, recorded, toolset):
        return recorded[call.id]
    waited = recorded.get(call.id)
    if _resumable(call, toolset) or (waited is not None and waited.error_type == WAITED):
        return None
    if call.id in record.ended_calls:
        return Message.tool_result(call, LOST, error_type="aborted")
    if call.id in record.started_calls:
        return Message.tool_result(call, ABORTED, error_type="aborted")
    return Message.tool_result(call, SKIPPED, error_type="skipped")


def _resumable(call: ToolCall, toolset: Toolset) -> bool:
    found = target(call, toolset)
    return found is not None and found.resumable
