"""Restoring a resumed run's tasks: the one layer that reads the checkpoint for them.

A resumed run wraps the executor of its job's steps (jobs/runner.py), and a resumed agent the
executor of its forks (`ForkExtension`), in `Restoring`. A task (a job step or a forked task)
that ran to an end in an earlier attempt of the run keeps that end: its output, status, steps
and spend (its whole subtree's, every attempt's) come from the trace, and so does its agent's
result, with the results of the tasks it forked. A task whose agent was cut off runs on from
its history (`TaskExecutor.resume_task`). Tasks that were cancelled, skipped or never started
are not restored: the scheduler decides about them again.

`restore_forks` gives a resumed agent back the forks it had got results for
(`ForkExtension.restore`), and `background_forks` the background forks it had started, to
start again.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from ..agent import RunResult, TaskResult, ToolContext
from ..agent.run_results import is_status, is_task_status
from ..messages import Message
from ..trace import ENDED_TASK, AgentHistory, AgentRecord, Checkpoint, ForkRecord
from .executor import Placement, TaskExecutor, TaskRequest, TaskSpec


class Restoring(TaskExecutor):
    """`inner`, in a run that resumes the one `checkpoint` recorded: a task that ended there
    keeps its result, and one whose agent was cut off goes on from its history."""

    def __init__(self, inner: TaskExecutor, checkpoint: Checkpoint) -> None:
        self.inner = inner
        self.checkpoint = checkpoint

    def ended_before(self, spec: TaskSpec, path: str, agent: str) -> TaskResult | None:
        return _ended(self.checkpoint, path, spec.id, agent, spec.depends_on)

    async def run_task(self, request: TaskRequest) -> TaskResult:
        history = self.checkpoint.history(request.path)
        if history is None:
            return await self.inner.run_task(request)
        return await self.inner.resume_task(request, history)

    async def resume_task(self, request: TaskRequest, history: AgentHistory) -> TaskResult:
        return await self.inner.resume_task(request, history)

    def placement(self, request: TaskRequest) -> Placement:
        return self.inner.placement(request)

    def budget_refusal(self, request: TaskRequest) -> str | None:
        return self.inner.budget_refusal(request)


def restore_forks(
    context: ToolContext,
    history: AgentHistory,
    messages: Sequence[Message],
    used: set[str],
    outputs: dict[str, str],
) -> None:
    """Bring back the forks a resumed agent made and got results for: their task ids are
    `used`, their `outputs` readable, their results among its children. A fork still without
    a result is left out: the resumed run calls it again."""
    checkpoint, record = history.checkpoint, history.record
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    for fork in checkpoint.forks_of(record.path):
        if fork.call_id not in answered or fork.background:
            continue
        children = restored_children(checkpoint, fork)
        used.update(checkpoint.tasks[p].id for p in fork.paths if p in checkpoint.tasks)
        outputs.update({c.id: c.output for c in children})
        context.children.extend(children)


def background_forks(
    history: AgentHistory, messages: Sequence[Message]
) -> list[tuple[list[TaskSpec], set[str]]]:
    """The background forks a resumed agent had started (the call that started each was
    answered): each one's tasks as the model wrote them, and the ids of those whose results
    had reached the agent."""
    checkpoint, record = history.checkpoint, history.record
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    calls = {c.id: c for m in messages for c in m.tool_calls}
    found = []
    for fork in checkpoint.forks_of(record.path):
        call = calls.get(fork.call_id) if fork.call_id is not None else None
        if not fork.background or call is None or call.id not in answered:
            continue
        try:
            tasks = json.loads(call.arguments)["tasks"]
            specs = [TaskSpec.model_validate(task) for task in tasks]
        except (ValueError, KeyError, TypeError, ValidationError):
            warnings.warn(
                f"a background fork of {record.path} cannot start again on resume: the "
                f"arguments of its call {call.id} are not its tasks",
                stacklevel=2,
            )
            continue
        found.append((specs, {s.id for s in specs if _given(s.id, record, messages)}))
    return found


def _given(task_id: str, record: AgentRecord, messages: Sequence[Message]) -> bool:
    """The task's result reached the agent: recorded so, and its block is in the
    conversation (a run killed between the two had not given it)."""
    block = f"### {task_id} ["
    return task_id in record.delivered and any(
        block in (m.content or "") for m in messages if m.role in ("user", "tool")
    )


def restored_children(checkpoint: Checkpoint, fork: ForkRecord) -> list[TaskResult]:
    """The results of one recorded fork's tasks, in the order they were given."""
    results = []
    for path in fork.paths:
        task = checkpoint.tasks.get(path)
        if task is None:
            continue
        ended = _ended(checkpoint, path, task.id, task.agent or "general", task.depends_on)
        if ended is not None:
            results.append(ended)
        elif task.status is not None:
            results.append(
                TaskResult(
                    id=task.id,
                    agent=task.agent or "general",
                    path=path,
                    status="skipped" if task.status == "skipped" else "cancelled",
                    reason=task.reason,
                    depends_on=task.depends_on,
                    usage=checkpoint.subtree_usage(path),
                    ended_at=task.ended_at,
                )
            )
    return results


def _ended(
    checkpoint: Checkpoint, path: str, task_id: str, agent: str, depends_on: list[str]
) -> TaskResult | None:
    task = checkpoint.tasks.get(path)
    record = checkpoint.agents.get(path)
    status = task.status if task is not None and task.status is not None else None
    if status is None and record is not None:
        status = record.status  # the run ended, but the trace stops before its task did
    if not is_task_status(status) or status not in ENDED_TASK:
        return None
    reason = task.reason if task is not None else None
    if reason is None and status != "completed":
        reason = record.error if record and record.error else f"ended {status}"
    return TaskResult(
        id=task_id,
        agent=agent,
        path=path,
        status=status,
        output=record.output if record else "",
        reason=reason,
        depends_on=depends_on,
        usage=checkpoint.subtree_usage(path),
        steps=record.steps if record else 0,
        started_at=task.started_at if task else None,
        ended_at=task.ended_at if task else None,
        run=_run(checkpoint, path),
    )


def _run(checkpoint: Checkpoint, path: str) -> RunResult[Any] | None:
    """The recorded result of the agent at `path`: read back, a typed answer's `output` is
    its JSON values."""
    record = checkpoint.agents.get(path)
    if record is None or not is_status(record.status) or record.status == "cancelled":
        return None
    children = [
        c for fork in checkpoint.forks_of(path) for c in restored_children(checkpoint, fork)
    ]
    return RunResult(
        agent=path,
        status=record.status,
        text=record.output,
        validated=record.validated,
        data=record.data,
        messages=record.messages,
        usage=record.usage,
        steps=record.steps,
        error=record.error,
        children=children,
    )
