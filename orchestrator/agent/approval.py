"""Before a tool call runs: guards that may refuse it, and a person's approval where the run's
permissions say `ask`.

Every call passes here (`ToolBatch`), after its arguments were checked and before it starts:

1. Each guard of the run (`ToolContext.guards`, from the agent's extensions: a skill's
   `allowed-tools`, a sub-agent's `tools`) may refuse it; the first refusal is its result.
2. `Permissions.decision(tool)`: `deny` refuses it; `ask` hands an `ApprovalRequest` to the
   run's approval callback (`ToolContext.approve`: sync or async, `True` approves, anything
   else, an exception included, denies). Without a callback the call is denied, and the
   observation says no one could be asked.

A refusal or denial is an error observation of type `denied` the model reads; the loop goes
on. Every decision on a call that needed one is a trace event `approval` (`decision`
approved/denied, `by` person/policy/nobody, the permission `rule`). An approved call of the
shell (python) skill runs with `shell` (`python`) granted for that one call.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from ..messages import ToolCall
from ..security import Permissions
from .threads import run_in_thread
from .tools import ToolContext


@dataclass(frozen=True)
class Refusal:
    """Why a call may not run: the text the model reads, and the result's error type."""

    text: str
    kind: str = "denied"


@dataclass(frozen=True)
class ApprovalRequest:
    """A call waiting for a person's decision."""

    agent: str
    """The path of the agent making the call (`planner/review`)."""
    tool: str
    arguments: dict[str, Any]
    call_id: str
    rule: str
    """The permission that asks, e.g. "permissions.shell is 'ask'"."""


Approver = Callable[[ApprovalRequest], bool | Awaitable[bool]]
"""The approval callback: True approves the call; a sync one runs in a thread of its own."""

Guard = Callable[[ToolCall, ToolContext], Refusal | None | Awaitable[Refusal | None]]
"""A check every call of a run passes before it starts; a Refusal stops it."""

NOBODY = (
    "no one can be asked in this run (it is not on a terminal, and no approval callback was given)"
)


async def admit(call: ToolCall, ctx: ToolContext) -> Refusal | ToolContext:
    """The context the call runs with, or why it may not run (its arguments are valid)."""
    for guard in ctx.guards:
        verdict = guard(call, ctx)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is not None:
            return verdict
    permissions = Permissions.coerce(ctx.permissions)
    decision, rule = permissions.decision(call.name)
    if decision == "allow" or rule is None:
        return ctx
    if decision == "deny":
        _record(ctx, call, "denied", "policy", rule)
        return Refusal(f"Permission denied: {call.name} is not allowed in this run ({rule}).")
    request = ApprovalRequest(ctx.agent, call.name, _arguments(call), call.id, rule)
    approved, by, why = await _ask(request, ctx)
    _record(ctx, call, "approved" if approved else "denied", by, rule, why)
    if not approved:
        return Refusal(f"Permission denied: {call.name} needs a person's approval ({rule}); {why}.")
    granted = permissions.granting(call.name)
    return ctx if granted is permissions else replace(ctx, permissions=granted)


async def _ask(request: ApprovalRequest, ctx: ToolContext) -> tuple[bool, str, str]:
    """(approved, who decided, why) for one request."""
    approve = ctx.approve
    if approve is None:
        return False, "nobody", NOBODY
    try:
        if inspect.iscoroutinefunction(approve) or inspect.iscoroutinefunction(
            type(approve).__call__
        ):
            answer = await approve(request)
        else:
            answer = await run_in_thread(approve, request)
            if inspect.isawaitable(answer):
                answer = await answer
    except Exception as exc:
        return False, "person", f"the approval callback failed ({type(exc).__name__}: {exc})"
    if answer is True:
        return True, "person", "approved"
    return False, "person", "a person denied it"


def _arguments(call: ToolCall) -> dict[str, Any]:
    value = json.loads(call.arguments or "{}")
    return value if isinstance(value, dict) else {"arguments": value}


def _record(
    ctx: ToolContext, call: ToolCall, decision: str, by: str, rule: str, why: str | None = None
) -> None:
    if ctx.trace is not None:
        ctx.trace.emit(
            "approval",
            ctx.agent,
            call_id=call.id,
            name=call.name,
            decision=decision,
            by=by,
            rule=rule,
            reason=why,
        )
