"""One model call, and what it is charged: count, reserve, warm, call, settle, charge.

The loop calls `call_model` once a step. In order:

1. **Count** the request (the offline counter) and **reserve** it on the budget: its input and
   its whole output allowance, and under a money cap the most it could cost (all input
   uncached). When the budget cannot cover it, no call is made (None): the loop wraps up.
2. **Warm a shared prefix**: sibling sub-agents of one definition start with the same tools
   array and system prompt. Sent together, their first requests would all miss the
   provider's prompt cache (a prefix is readable only once a request that wrote it was
   answered), and each would pay to write it. So a request whose model and prefix another
   request of the same run has in flight, with no request of that prefix answered yet, waits
   for that one (at most `MAX_WAIT` seconds) and then reads the prefix instead of writing it.
   The hold is one run's (`run_prefixes`: the tree of one `run` call, or one job's steps):
   unrelated runs in one process never wait for each other, whatever they send. A prefix
   counts as warm for `WARM_FOR` seconds after an answer; one too short for any provider to
   cache (under about 1,024 tokens, `MIN_PREFIX_CHARS` of JSON) is never waited for.
3. **Call** `model.complete(request)`. On any failure the reservation goes back to the budget.
   A real cancellation of the run goes through as it is; anything else that is not an
   ordinary error (a stray `CancelledError` an adapter raised by itself, a `SystemExit` from
   its code) becomes a `ModelError`, which ends this agent as `error` and leaves its siblings
   running.
4. **Settle and charge**: the provider's usage when it is believable, else our count. Counts
   that are missing, not numbers or negative are replaced by our own count of the request and
   reply; a total that disagrees with its parts becomes their sum. A total of more than
   `ABSURD_FACTOR` times what the call reserved cannot be right: the call is charged its
   reservation. When such a total also runs to `LYING_TOTAL` or more, the provider is clearly
   lying (`ModelCall.untrusted`): the loop ends the run as `error`, since a budget fed such
   numbers means nothing. Money is charged when the model has a price (models/prices.py),
   never a made-up one; a budget that caps money cannot run an unpriced model, and says so.
   The call is recorded as a `model_call` trace event, with any doubt and the raw usage.
   Believable prompt tokens also calibrate the counter for this model
   (`TokenCounter.calibrate`), and come back with the call (`ModelCall.prompt_tokens`) for
   the agent to measure its requests by: the context window is fitted in the model's own
   measure (agent/compaction.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
)
from contextvars import ContextVar
from dataclasses import dataclass

from ..errors import ModelError
from ..events import CallUsage, TraceEvent
from ..events import ModelCall as ModelCalled
from ..events import ModelError as ModelFailed
from ..messages import Message, ToolSpec, Usage, tools_digest, tools_fingerprint
from ..models.base import (
    ChatModel,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    ToolChoice,
    output_cap,
    price_of,
    unwrap,
)
from ..models.prices import unpriced
from ..tokens import TokenCounter
from ..trace import Trace
from .token_budget import Reservation, TokenBudget

MAX_WAIT = 10.0
WARM_FOR = 240.0
MAX_REMEMBERED = 1024
MIN_PREFIX_CHARS = 4 * 1024  # about 1,024 tokens: the least a provider caches
ABSURD_FACTOR = 10
LYING_TOTAL = 1_000_000


@dataclass(frozen=True)
class ModelCall:
    """One call as it was made: the reply, what it was charged, and whether to stop the run."""

    response: ModelResponse
    usage: Usage
    cost: float | None
    """US dollars, when the model has a price."""
    untrusted: str | None = None
    """Why the provider's usage is a lie: the run must end (see the module's docstring)."""
    prompt_tokens: int | None = None
    """The provider's count of the request's prompt, when it reported a believable one."""


async def call_model(
    model: ChatModel,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    counter: TokenCounter,
    budget: TokenBudget,
    tool_choice: ToolChoice,
    max_output_tokens: int,
    agent: str,
    step: int,
    trace: Trace,
    on_event: Callable[[TraceEvent], object] | None = None,
    input_tokens: int | None = None,
    output_schema: OutputSchema | None = None,
) -> ModelCall | None:
    """Count, reserve, warm, call, settle and charge one call; None when the budget cannot
    cover it. `step` is the number of this call in the agent's run, for the trace;
    `input_tokens`, the request's count when the caller has just made it; `output_schema`,
    the schema a native structured answer follows. The answer allowance asked for is cut to
    what the token budget has left, down to `answer_floor(model)` (the trace says so)."""
    if input_tokens is None:
        input_tokens = counter.count_request(messages, tools)
    wanted = max_output_tokens
    max_output_tokens = within_budget(
        budget, model, input_tokens, max_output_tokens, answer_only=tool_choice == "none"
    )
    reservation = reserve(budget, model, input_tokens, max_output_tokens)
    if reservation is None:
        return None
    request = ModelRequest(
        messages=messages,
        tools=tools,
        tool_choice=tool_choice,
        max_output_tokens=max_output_tokens,
        agent=agent,
        run=trace.run_id,
        input_tokens=input_tokens,
        on_event=on_event,
        output_schema=output_schema,
    )
    began = time.perf_counter()
    try:
        response = await _complete(model, request, budget, reservation)
    except BaseException as exc:
        # A failed or cancelled call still took its time: say how long.
        trace.emit(
            ModelFailed,
            agent=agent,
            step=step,
            model=model.name,
            error=str(exc) or type(exc).__name__,
            cancelled=isinstance(exc, asyncio.CancelledError),
            duration_ms=round((time.perf_counter() - began) * 1000, 3),
        )
        raise
    charged = charge(
        response.usage,
        response.raw_usage,
        lambda: Usage.of(input_tokens, counter.count_message(response.message)),
        reservation.tokens,
    )
    usage = charged.usage
    reported = response.usage is not None and charged.doubt is None
    if reported:
        counter.calibrate(unwrap(model), input_tokens, usage.input_tokens)
    price = price_of(model)
    cost = price.cost(usage) if price is not None else None
    budget.settle(reservation, usage.total_tokens, cost or 0.0)
    if trace.recording:  # the tools' digest and schemas are costly: built for a record only
        digest = tools_digest(request.tools)
        # The schemas once per distinct tools array: what the model saw can be read back.
        sent = request.tools and trace.first_time(f"tools:{digest}")
        trace.emit(
            ModelCalled,
            agent=agent,
            step=step,
            model=model.name,
            response_model=_text(response.extra.get("model")),
            response_id=_text(response.extra.get("id")),
            tool_choice=choice_name(request),
            tools=[spec.name for spec in request.tools],
            tools_digest=digest,
            tool_specs=list(request.tools) if sent else None,
            input_estimate=input_tokens,
            usage=CallUsage.of(usage),
            reported=reported,
            finish_reason=response.finish_reason,
            duration_ms=round((time.perf_counter() - began) * 1000, 3),
            budget_remaining=budget.remaining,
            max_output_tokens=max_output_tokens,
            allowance_cut_from=wanted if max_output_tokens < wanted else None,
            cost=round(cost, 8) if cost is not None else None,
            budget_remaining_usd=budget.remaining_cost if budget.caps_cost else None,
            usage_doubt=charged.doubt,
            usage_raw=response.raw_usage if charged.doubt else None,
        )
    untrusted = f"{charged.doubt}; the run was stopped" if charged.absurd else None
    return ModelCall(response, usage, cost, untrusted, usage.input_tokens if reported else None)


ANSWER_FLOOR = 256
"""The least answer allowance a call asks for when the budget has less left than the agent's
own allowance (a model configured with its own `max_output_tokens` keeps that as its floor)."""


def answer_floor(model: ChatModel) -> int:
    """The smallest answer allowance a call may be cut to: the model's own setting, else
    `ANSWER_FLOOR`."""
    return output_cap(model) or ANSWER_FLOOR


def within_budget(
    budget: TokenBudget,
    model: ChatModel,
    input_tokens: int,
    wanted: int,
    *,
    answer_only: bool = False,
) -> int:
    """The answer allowance to ask for: `wanted`, or, when the token budget has less left,
    what it has, down to the floor (below it the call is refused as before: a cut to
    nothing would only buy an empty answer). A call that may still call tools leaves room
    beside it for a last call without them (about its own prompt plus the floor), so the
    run can always end with an answer; a call with tools off (`answer_only`) may take all."""
    left = budget.remaining
    if left is None or left - input_tokens >= wanted:
        return wanted
    floor = min(wanted, answer_floor(model))
    room = left - input_tokens - (0 if answer_only else input_tokens + floor)
    return max(floor, room) if room >= floor else wanted


def reserve(
    budget: TokenBudget, model: ChatModel, input_tokens: int, output_tokens: int
) -> Reservation | None:
    """Set a call's tokens (and, under a money cap, its most cost) aside; None if the budget
    cannot cover them."""
    cost = 0.0
    if budget.caps_cost:
        price = price_of(model)
        if price is None:
            raise unpriced(model.name)
        cost = price.most(input_tokens, output_tokens)
    return budget.try_reserve(input_tokens + output_tokens, cost)


async def _complete(
    model: ChatModel, request: ModelRequest, budget: TokenBudget, reservation: Reservation
) -> ModelResponse:
    """`model.complete(request)` once its prefix is warm; on any failure the reservation goes
    back to the budget."""
    try:
        async with warm_prefix(model, request):
            return await model.complete(request)
    except BaseException as exc:
        budget.release(reservation)
        error = _as_model_error(exc)
        if error is exc:
            raise
        raise error from exc


def _as_model_error(exc: BaseException) -> BaseException:
    if isinstance(exc, Exception):
        return exc
    task = asyncio.current_task()
    if isinstance(exc, asyncio.CancelledError) and task is not None and task.cancelling():
        return exc
    detail = f": {exc}" if str(exc) else ""
    return ModelError(f"the model adapter raised {type(exc).__name__}{detail}")


def choice_name(request: ModelRequest) -> str:
    """The request's tool choice as the trace names it: `auto`, `none`, `tool:NAME`."""
    choice = request.tool_choice
    return choice if isinstance(choice, str) else f"tool:{choice.name}"


# What a call is charged: the provider's usage when it is believable, else our count.


@dataclass(frozen=True)
class Charge:
    """The usage a call is charged, and why the provider's own figures were not taken."""

    usage: Usage
    doubt: str | None = None
    absurd: bool = False
    """The provider is clearly lying: the run must end."""


def charge(
    reported: Usage | None, raw: object, estimate: Callable[[], Usage], reserved: int
) -> Charge:
    """The usage to settle for one call; `estimate()` is the loop's own count of it."""
    if reported is None:
        doubt = None if raw is None else "the provider's usage has no usable numbers"
        return Charge(estimate(), doubt)
    parts = (reported.input_tokens, reported.output_tokens, reported.total_tokens)
    if min(parts) < 0:
        return Charge(estimate(), "the provider reported negative token counts")
    usage, doubt = reported, None
    if reported.total_tokens != reported.input_tokens + reported.output_tokens:
        usage = Usage.of(reported.input_tokens, reported.output_tokens)
        doubt = "the provider's total did not match its input and output counts"
    if usage.total_tokens > ABSURD_FACTOR * max(reserved, 1):
        doubt = (
            f"the provider reported {usage.total_tokens:,} tokens for a call that could use "
            f"at most about {reserved:,}"
        )
        counted = min(estimate().input_tokens, reserved)
        charged = Usage.of(counted, reserved - counted)
        return Charge(charged, doubt, absurd=usage.total_tokens >= LYING_TOTAL)
    return Charge(usage, doubt)


# Warming a shared prompt prefix once, before the requests that would all write it.


class _Prefixes:
    """One run's prefixes: those in flight for the first time, and when each was last
    answered."""

    def __init__(self) -> None:
        self.first: dict[str, asyncio.Event] = {}
        self.answered: dict[str, float] = {}

    def remember(self, key: str) -> None:
        """Note that a request with this prefix was answered now; forget prefixes long cold."""
        now = time.monotonic()
        self.answered[key] = now
        if len(self.answered) > MAX_REMEMBERED:
            self.answered = {k: t for k, t in self.answered.items() if now - t <= WARM_FOR}


_RUN_PREFIXES: ContextVar[_Prefixes | None] = ContextVar("run_prefixes", default=None)
_NO_HOLD = nullcontext()


def _text(value: object) -> str | None:
    """A provider's id or model name as text (None when it gave none)."""
    return None if value is None else str(value)


def run_prefixes() -> AbstractContextManager[None]:
    """The scope of one run's prefix hold, entered by a run (and a job) before its first call.

    Agents started inside it (sub-agents, a job's steps: asyncio tasks copy the context they
    are made in) share it; a run started where one is open joins it. Calls made outside any
    run are never held."""
    if _RUN_PREFIXES.get() is not None:
        return _NO_HOLD  # joined: nothing to set or reset (every sub-agent's run)
    return _new_prefixes()


@contextmanager
def _new_prefixes() -> Iterator[None]:
    token = _RUN_PREFIXES.set(_Prefixes())
    try:
        yield
    finally:
        _RUN_PREFIXES.reset(token)


def prefix_key(model: ChatModel, request: ModelRequest) -> str | None:
    """The model, the tools array and the system prompt (what a provider caches first) as a
    key; None when they are too short to be cached at all."""
    messages = request.messages  # a transcript's view: its first message read alone
    first = messages[0] if messages else None
    system = (first.content or "") if first is not None and first.role == "system" else ""
    size, tools = tools_fingerprint(request.tools)
    if size + len(system) < MIN_PREFIX_CHARS:
        return None
    return hashlib.sha256(f"{model.name}\n{tools}\n{system}".encode()).hexdigest()


def warm_prefix(model: ChatModel, request: ModelRequest) -> AbstractAsyncContextManager[None]:
    """Hold a request back while the first request with its prefix is still unanswered.

    Only that first request releases the ones waiting for it, when it ends however it ends;
    only an answered request makes the prefix warm (a failed one wrote nothing). Only
    requests of one run wait for each other (`run_prefixes`)."""
    prefixes = _RUN_PREFIXES.get()
    key = prefix_key(model, request) if prefixes is not None else None
    if prefixes is None or key is None:
        return _NO_HOLD  # no generator made for a hold that holds nothing (most calls)
    return _holding(prefixes, key)


@asynccontextmanager
async def _holding(prefixes: _Prefixes, key: str) -> AsyncIterator[None]:
    answered = prefixes.answered.get(key)
    first: asyncio.Event | None = None
    if answered is None or time.monotonic() - answered > WARM_FOR:
        pending = prefixes.first.get(key)
        if pending is not None:
            # Not `asyncio.wait_for`: before Python 3.12 it drops a cancellation that arrives
            # as the event fires, and the cancelled request would go on to the model.
            try:
                async with asyncio.timeout(MAX_WAIT):
                    await pending.wait()
            except TimeoutError:
                pass
        else:
            first = prefixes.first[key] = asyncio.Event()
    ok = False
    try:
        yield
        ok = True
    finally:
        if ok:
            prefixes.remember(key)
        if first is not None:
            prefixes.first.pop(key, None)
            first.set()
