"""Resuming an agent's run from what its trace recorded (the trace's checkpoint).

An agent whose trace was opened to resume a run, and whose path was cut off there (a crash,
`kill -9`) or cancelled (Ctrl-C), does not start over: it restarts from its last complete
turn. Its conversation is rebuilt from the trace; its steps, usage, budget and repeat count go
on from where they were; its extensions get their state back (skills loaded, forks made); and
the turn that was cut gets the results it is missing:

- a call whose result was recorded keeps it;
- a resumable tool is called again: one that only reads (`load_skill`, `read_task_output`),
  or `fork`, which resumes itself from the trace;
- a call that had started gets `aborted` (it may have had effects, so it is never silently
  repeated: the model sees that and decides), even if it ended and only its result was lost;
- a call that never started gets `skipped`.

Orchestrator notes the loop adds again by itself (the last-step and budget notes) are dropped
from the end of the rebuilt conversation; `run_start` says how many messages were kept.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from ..messages import Message, ToolCall
from ..trace import AgentRecord, Trace
from .dispatch import target
from .state import CutTurn, RunState
from .tools import ToolContext, Toolset

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


@runtime_checkable
class Restorable(Protocol):
    """An extension with per-run state to bring back when a run resumes."""

    def restore(
        self, context: ToolContext, record: AgentRecord, messages: Sequence[Message]
    ) -> None: ...


def resume_run(
    state: RunState,
    trace: Trace | None,
    *,
    extensions: Iterable[object],
    notes: Collection[str],
    shared_budget: bool,
) -> dict[str, Any]:
    """If `trace` resumes a run that was cut off at this agent's path, fill the new run's
    `state` from its record; returns the fields the run's `run_start` adds ({} otherwise).

    The run's own budget is charged what the path's subtree spent before, unless it is the
    shared budget (`shared_budget`), which counts the earlier attempts by itself.
    """
    checkpoint = trace.checkpoint if trace is not None else None
    path = state.context.agent
    record = checkpoint.claim(path) if checkpoint is not None else None
    if checkpoint is None or record is None:
        return {}
    spent = None
    if not shared_budget:
        spent = (checkpoint.subtree_usage(path).total_tokens, checkpoint.subtree_cost(path))
    kept = resume_state(state, record, extensions=extensions, notes=notes, spent=spent)
    return {"resumed": True, "kept": kept, "steps": state.steps, "usage": state.usage.record()}


def resume_state(
    state: RunState,
    record: AgentRecord,
    *,
    extensions: Iterable[object],
    notes: Collection[str],
    spent: tuple[int, float] | None,
) -> int:
    """Fill a new run's state from `record`; returns how many recorded messages were kept.

    `spent` (tokens, dollars) is charged to the run's own budget when it has one (a cap
    inside a shared budget, which counts the earlier attempts itself); None when the budget
    is the shared one.
    """
    messages, _ = cut_turn(record, state.context.toolset, notes)
    for extension in extensions:
        if isinstance(extension, Restorable):
            extension.restore(state.context, record, messages)
    # Which calls of the cut turn run again depends on their tools, loaded skills' included:
    # so the cut turn is read once the extensions have given those tools back.
    _, cut = cut_turn(record, state.context.toolset, notes)
    state.transcript.extend(messages)
    state.steps, state.usage, state.resume = record.steps, record.usage, cut
    state.cost = record.cost
    if spent is not None:
        state.budget.record_spent(*spent)
    for message in messages:
        if message.role == "assistant" and message.tool_calls:
            state.repeats.too_often(message.tool_calls)
    return len(messages)


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
    if result is None:
        return True
    return _resumable(call, toolset) and result.error_type in _CANCELLED


def _answer(
    call: ToolCall, recorded: dict[str | None, Message], toolset: Toolset, record: AgentRecord
) -> Message | None:
    """The result a call of the cut turn gets, or None when it is called again."""
    if not _again(call, recorded, toolset):
        return recorded[call.id]
    if _resumable(call, toolset):
        return None
    if call.id in record.ended_calls:
        return Message.tool_result(call, LOST, error_type="aborted")
    if call.id in record.started_calls:
        return Message.tool_result(call, ABORTED, error_type="aborted")
    return Message.tool_result(call, SKIPPED, error_type="skipped")


def _resumable(call: ToolCall, toolset: Toolset) -> bool:
    found = target(call, toolset)
    return found is not None and found.resumable
