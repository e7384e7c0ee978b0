"""Running the tool calls of one assistant turn, each admitted first.

Invariants kept here: every call gets exactly one result, carrying its call id, in the order
the model gave the calls; failures become error results, never exceptions; calls run
concurrently up to a limit, and an `exclusive` tool runs alone, as a barrier. If the batch is
cancelled, `finish_cancelled` gives calls that had started an `aborted` result and calls that
never started a `skipped` one.

Results are handed to `on_result` in the model's order as soon as every call before them has
one, not only when the whole turn is done: the trace then records each finished call's result
while slower calls of the same turn still run, and a run killed half-way through a turn loses
only the results it truly had not got.

Every call is admitted (`admit`) after its arguments were checked and before it starts; a
call waiting for approval has not started:

1. Each guard of the run (`ToolContext.guards`, from the agent's extensions: a skill's
   `allowed-tools`, a sub-agent's `tools`) may refuse it; the first refusal is its result.
2. `Permissions.decision(tool)`: `deny` refuses it; `ask` first asks the run's
   preapprovers (`ToolContext.preapprovers`: an active skill's `allowed-tools`), and a grant
   runs it unasked (an `approval` event `by: skill`); else it hands an `ApprovalRequest` to
   the run's approval callback (`ToolContext.approve`: sync or async, `True` approves,
   anything else, an exception included, denies). Without a callback the run's `on_input`
   decides (agent/waiting.py): by default the call waits for a person's answer, the run ends
   `input_required` and the answer given on resume decides; with `deny` the call is denied,
   and the observation says no one could be asked, and why no skill pre-approved it.

A refusal or denial is an error observation of type `denied` the model reads; the loop goes
on. A tool that raises fails its call the same way, and the exception, traceback included,
goes to the `orchestrator.tools` logger too: `WARNING` for an unexpected one, `DEBUG` for a
`ToolError` (a tool's own words to the model). Every decision on a call that needed one is a
trace event `approval` (`decision` approved/denied, `by` person/policy/nobody, the
permission `rule`). An approved call of the shell (python) skill runs with `shell`
(`python`) granted for that one call.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

from ..errors import PermissionDenied, ToolError, ToolInfrastructureError
from ..events import Approval, InputRequest, InputRequested, Note, ToolEnd, ToolStart
from ..messages import Message, ToolCall
from .compaction import NOTE, WorkingRecord
from .tools import (
    DISPATCH_TOOL,
    ApprovalRequest,
    ArgumentsError,
    ExitFromCode,
    InputRefused,
    Refusal,
    Tool,
    ToolContext,
    WaitingForInput,
    asking_a_person,
    limit_time,
    render_result,
    run_in_thread,
    unwrap,
)

DEFAULT_MAX_RESULT_CHARS = 100_000
_ALONE = nullcontext()
NOBODY = (
    "no one can be asked in this run (it is not on a terminal, no approval callback was given, "
    "and its on_input is 'deny')"
)

logger = logging.getLogger("orchestrator.tools")


class ToolBatch:
    """The calls of one turn, their results, and which of them have started.

    `known` gives some calls their result in advance (a resumed run's cut turn): those calls
    are not run, and their results are handed on in order with the others.
    """

    def __init__(
        self,
        calls: Sequence[ToolCall],
        context: ToolContext,
        *,
        concurrency: int = 8,
        default_timeout: float | None = None,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        on_result: Callable[[Message], None] | None = None,
        known: Sequence[Message | None] = (),
    ) -> None:
        self.calls = list(calls)
        self.context = context
        # Each call as it will run (a dispatched one as the call it stands for), read once.
        self.unwrapped = [unwrap(call, context.toolset) for call in self.calls]
        self.default_timeout = default_timeout
        self.max_result_chars = max_result_chars
        self.results: list[Message | None] = [None] * len(self.calls)
        self.started = [False] * len(self.calls)
        self.on_result = on_result
        self.delivered = 0
        self.waiting: list[InputRequest] = []
        """What the turn's calls wait for a person to answer (agent/waiting.py)."""
        self.input_refused: str | None = None
        """Why a call that needed a person ended the run (`on_input: fail`)."""
        # A turn of one call (most turns) runs it at once: no semaphore to make and take.
        self._slots: AbstractAsyncContextManager[object] = (
            asyncio.Semaphore(max(1, concurrency)) if len(self.calls) > 1 else _ALONE
        )
        for index, result in enumerate(known):
            if result is not None:  # a result given in advance (a resumed turn): not run
                self.results[index] = result
                self.started[index] = True

    async def run(self) -> list[Message]:
        self._set_ready()
        for group in self._groups():
            if len(group) == 1:
                await self._run_one(group[0])
            else:
                await asyncio.gather(*(self._run_one(i) for i in group))
        return [r for r in self.results if r is not None]

    def finish_cancelled(self) -> list[Message]:
        """Results for every call not yet handed to `on_result` (every call, without one),
        filling in `aborted` and `skipped` where none exists yet."""
        for index, call in enumerate(self.calls):
            if self.results[index] is None:
                if self.started[index]:
                    text, kind = "Aborted: the run was cancelled while this call ran.", "aborted"
                else:
                    text, kind = (
                        "Skipped: the run was cancelled before this call started.",
                        "skipped",
                    )
                self.results[index] = Message.tool_result(call, text, error_type=kind)
        rest = self.results[self.delivered :] if self.on_result else self.results
        self.delivered = len(self.results)
        return [r for r in rest if r is not None]

    def _set(self, index: int, result: Message) -> None:
        """Keep a call's result, and hand on every result whose turn has come."""
        self.results[index] = result
        self._set_ready()

    def _set_ready(self) -> None:
        """Hand `on_result` every result, in order, up to the first call still without one."""
        while (
            self.on_result is not None
            and self.delivered < len(self.results)
            and (ready := self.results[self.delivered]) is not None
        ):
            self.delivered += 1
            self.on_result(ready)

    def _groups(self) -> Iterator[list[int]]:
        group: list[int] = []
        for index, unwrapped in enumerate(self.unwrapped):
            found = None if unwrapped.error else self.context.toolset.get(unwrapped.call.name)
            if found is not None and found.exclusive:
                if group:
                    yield group
                yield [index]
                group = []
            else:
                group.append(index)
        if group:
            yield group

    async def _run_one(self, index: int) -> None:
        if self.results[index] is not None:
            return
        outer = self.calls[index]
        unwrapped = self.unwrapped[index]
        call = unwrapped.call  # a dispatched call runs as the call it stands for
        if unwrapped.error is not None:
            error = Message.tool_result(call, unwrapped.error, error_type="invalid_arguments")
            self._set(index, error)
            return
        found = self.context.toolset.get(call.name)
        if found is None:
            text = self._unknown_tool_text(call.name)
            self._set(index, Message.tool_result(call, text, error_type="unknown_tool"))
            return
        try:
            kwargs = found.parse_arguments(call.arguments)
        except ArgumentsError as exc:
            self._set(index, Message.tool_result(call, str(exc), error_type=exc.kind))
            return
        try:
            admitted = await admit(call, self.context)
        except (WaitingForInput, InputRefused) as exc:
            self._set(index, self._unanswered(call, exc))
            return
        if isinstance(admitted, Refusal):
            self._set(index, Message.tool_result(call, admitted.text, error_type=admitted.kind))
            return
        if found.context_param is not None:  # a tool that reads its context knows its call
            admitted = admitted.for_call(call.id)
        async with self._slots:
            self.started[index] = True
            dispatched = call is not outer
            self._set(index, await self._invoke(found, call, kwargs, admitted, dispatched))

    async def _invoke(
        self,
        found: Tool,
        call: ToolCall,
        kwargs: dict[str, object],
        context: ToolContext,
        dispatched: bool = False,
    ) -> Message:
        trace, agent = context.trace, context.agent
        via = DISPATCH_TOOL if dispatched else None
        trace.emit(ToolStart, agent=agent, call_id=call.id, name=call.name, via=via)
        began = time.perf_counter()
        try:
            text, kind = await self._outcome(found, kwargs, context)
        except asyncio.CancelledError:
            _tool_end(context, call, "aborted", began)  # every tool_start has its tool_end
            raise
        except (WaitingForInput, InputRefused) as exc:
            result = self._unanswered(call, exc)
            _tool_end(context, call, result.error_type, began)
            return result
        if len(text) > self.max_result_chars:
            cut = len(text) - self.max_result_chars
            text = f"{text[: self.max_result_chars]}\n[... {cut} more characters cut]"
        _tool_end(context, call, kind, began)
        if kind is None and found.changes is not None:
            changed = kwargs.get(found.changes)
            if isinstance(changed, str):
                _record_change(context, changed)
        return Message.tool_result(call, text, error_type=kind, pinned=found.pin and kind is None)

    async def _outcome(
        self, found: Tool, kwargs: dict[str, object], context: ToolContext
    ) -> tuple[str, str | None]:
        timeout = found.timeout if found.timeout is not None else self.default_timeout
        deadline: asyncio.Timeout | None = None
        try:
            if timeout is None:  # most calls: no timer at all
                value = await found.invoke(kwargs, context)
            else:  # a person asked inside the call (a sub-agent's approval) stops its clock
                async with limit_time(timeout) as deadline:
                    value = await found.invoke(kwargs, context)
            return render_result(value), None
        except TimeoutError as exc:
            if deadline is not None and deadline.expired():
                return f"Tool {found.name} timed out after {timeout:g} s.", "timeout"
            _log_failure(found, context, exc)
            return f"Tool {found.name} raised TimeoutError.", "tool_error"
        except PermissionDenied as exc:
            _log_failure(found, context, exc, logging.DEBUG)
            return f"Permission denied: {exc}", "denied"
        except ToolInfrastructureError as exc:
            _log_failure(found, context, exc)
            return (
                f"Tool {found.name} is unavailable (infrastructure failure): {exc}",
                "infrastructure",
            )
        except ToolError as exc:
            _log_failure(found, context, exc, logging.DEBUG)
            return str(exc), "tool_error"
        except (WaitingForInput, InputRefused):
            raise
        except ExitFromCode as exc:
            _log_failure(found, context, exc)
            return f"Tool {found.name} tried to exit: {exc}. The call failed.", "tool_error"
        except (SystemExit, KeyboardInterrupt) as exc:
            # Raised by an async tool's own code: it fails this call, not the process.
            _log_failure(found, context, exc)
            text = f"Tool {found.name} tried to exit: {type(exc).__name__}. The call failed."
            return text, "tool_error"
        except Exception as exc:
            _log_failure(found, context, exc)
            return f"Tool {found.name} raised {type(exc).__name__}: {exc}", "tool_error"

    def _unanswered(self, call: ToolCall, exc: WaitingForInput | InputRefused) -> Message:
        """The result of a call that needs a person's answer: it waits (its requests are
        recorded, and the run ends `input_required` after the turn), or, with `on_input:
        fail`, it ends the run."""
        if isinstance(exc, InputRefused):
            self.input_refused = str(exc)
            return Message.tool_result(call, f"Refused: {exc}.", error_type="input_refused")
        trace = self.context.trace
        for request in exc.requests:
            if not exc.relayed:
                trace.emit(InputRequested, agent=request.agent, request=request)
            self.waiting.append(request)
        ids = ", ".join(r.id for r in exc.requests)
        text = f"Waiting for a person's answer ({ids}): the run goes on once it is given."
        return Message.tool_result(call, text, error_type="input_required")

    def _unknown_tool_text(self, name: str) -> str:
        names = self.context.toolset.names
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        available = ", ".join(names) if len(names) <= 30 else f"{len(names)} tools"
        return f"Unknown tool {name!r}.{hint} Available: {available or 'none'}."


def _tool_end(context: ToolContext, call: ToolCall, kind: str | None, began: float) -> None:
    context.trace.emit(
        ToolEnd,
        agent=context.agent,
        call_id=call.id,
        name=call.name,
        error_type=kind,
        duration_ms=round((time.perf_counter() - began) * 1000, 3),
    )


def _log_failure(
    found: Tool, context: ToolContext, exc: BaseException, level: int = logging.WARNING
) -> None:
    """A tool's exception, with its traceback, for the program running the agent (the model
    reads only its message)."""
    logger.log(
        level,
        "tool %s of agent %s raised %s: %s",
        found.name,
        context.agent,
        type(exc).__name__,
        exc,
        exc_info=exc,
    )


async def admit(call: ToolCall, ctx: ToolContext) -> Refusal | ToolContext:
    """The context the call runs with, or why it may not run (its arguments are valid)."""
    for guard in ctx.guards:
        verdict = guard(call, ctx)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is not None:
            return verdict
    permissions = ctx.permissions
    decision, rule = permissions.decision(call.name)
    if decision == "allow" or rule is None:
        return ctx
    verdicts = [v for check in ctx.preapprovers if (v := check(call, ctx)) is not None]
    preapproved = next((v for v in verdicts if v.granted), None)
    if decision == "deny":
        _record(ctx, call, "denied", "policy", rule)
        text = f"Permission denied: {call.name} is not allowed in this run ({rule})."
        if preapproved is not None:
            text += f" It is {preapproved.reason}, but that never grants what the run denies."
        return Refusal(text)
    if preapproved is not None:
        _record(ctx, call, "approved", "skill", rule, preapproved.reason)
    else:
        request = ApprovalRequest(ctx.agent, call.name, _arguments(call), call.id, rule)
        if ctx.approve is None:  # no one live: the answer comes later, or the policy denies
            approved, by, why = await _answered(request, ctx.for_call(call.id))
        else:
            approved, by, why = await _ask(request, ctx)
        _record(ctx, call, "approved" if approved else "denied", by, rule, why)
        if not approved:
            notes = "".join(f" ({v.reason})" for v in verdicts)
            return Refusal(
                f"Permission denied: {call.name} needs a person's approval ({rule}); {why}." + notes
            )
    granted = permissions.granting(call.name)
    return ctx if granted is permissions else ctx.granting(granted)


async def _answered(request: ApprovalRequest, ctx: ToolContext) -> tuple[bool, str, str]:
    """(approved, who decided, why) for a request no one live can decide: the answer given
    on resume, or the run's `on_input` (`wait` raises WaitingForInput)."""
    from .waiting import answer_for, new_request  # loaded where no one live can approve

    shown = json.dumps(request.arguments, ensure_ascii=False)
    if len(shown) > 1_000:
        shown = shown[:1_000] + " [... cut]"
    asked = new_request(
        ctx,
        "approval",
        f"May {request.agent} call {request.tool} with {shown}? ({request.rule})",
        source=f"agent {request.agent}",
        form="yes_no",
        tool=request.tool,
    )
    answer = await answer_for(ctx, asked)
    if answer.by != "person":
        return False, "nobody", NOBODY
    if answer.action == "accept" and answer.value is True:
        return True, "person", f"approved (answer {asked.id})"
    return False, "person", f"a person denied it (answer {asked.id})"


async def _ask(request: ApprovalRequest, ctx: ToolContext) -> tuple[bool, str, str]:
    """(approved, who decided, why) for one request."""
    approve = ctx.approve
    if approve is None:
        return False, "nobody", NOBODY
    try:
        async with asking_a_person():
            if inspect.iscoroutinefunction(approve) or inspect.iscoroutinefunction(
                type(approve).__call__
            ):
                answer = await approve(request)  # type: ignore[misc]  # checked: a coroutine
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
    ctx.trace.emit(
        Approval,
        agent=ctx.agent,
        call_id=call.id,
        name=call.name,
        decision=decision,
        by=by,
        rule=rule,
        reason=why,
    )


def _record_change(context: ToolContext, path: str) -> None:
    """A file the call changed joins the run's working record; an agent that keeps a note
    gets a `note` event naming that one file (not the whole record: the trace stays linear
    in the changes)."""
    record = context.state_of(WorkingRecord)
    if record.changed(path) and NOTE.name in context.toolset:
        context.trace.emit(
            Note, agent=context.agent, changed=path, files_changed=record.files_changed
        )
