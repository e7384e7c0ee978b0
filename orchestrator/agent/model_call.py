"""One model call as the loop makes it: the reservation given back when it fails, and what
a failure may raise.

A real cancellation of the run goes through as it is. Anything else that is not an ordinary
error (a stray `CancelledError` an adapter raised by itself, a `SystemExit` from its code)
becomes a `ModelError`, which ends this agent as `error` and leaves its siblings running.
"""

from __future__ import annotations

import asyncio

from ..errors import ModelError
from ..models.base import ChatModel, ModelRequest, ModelResponse
from .budget import Reservation, TokenBudget
from .warmup import warm_prefix


async def complete(
    model: ChatModel, request: ModelRequest, budget: TokenBudget, reservation: Reservation
) -> ModelResponse:
    """`model.complete(request)`; on any failure the reservation goes back to the budget.

    A request whose prompt prefix another request is writing to the provider's cache right
    now waits for it first (warmup.py)."""
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
