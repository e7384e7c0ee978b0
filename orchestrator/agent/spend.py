"""One model call's spend: reserved on the budget before it is made, charged after it.

Tokens always; money too when the model has a price (models/prices.py). A budget that caps
money reserves the most the call could cost (all input uncached, the whole output allowance)
and settles what it did cost. A model without a price has no cost, never a made-up one; a
budget that caps money cannot run it, and says so.
"""

from __future__ import annotations

import time

from ..errors import UntrustedUsage
from ..messages import Usage
from ..models.base import ChatModel, ModelRequest, ModelResponse
from ..models.prices import price_of, unpriced
from ..tokens import TokenCounter
from .accounting import charge
from .budget import Reservation, TokenBudget
from .model_call import choice_name, complete
from .state import RunState


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


async def send(
    agent: str,
    model: ChatModel,
    counter: TokenCounter,
    state: RunState,
    request: ModelRequest,
    reservation: Reservation,
) -> ModelResponse:
    """Make the call, settle it on the budget, add it to the run's usage, record it."""
    began = time.perf_counter()
    response = await complete(model, request, state.budget, reservation)
    charged = charge(
        response.usage,
        response.raw_usage,
        lambda: Usage.of(request.input_tokens or 0, counter.count_message(response.message)),
        reservation.tokens,
    )
    usage = charged.usage
    price = price_of(model)
    cost = price.cost(usage) if price is not None else None
    state.budget.settle(reservation, usage.total_tokens, cost or 0.0)
    state.usage = state.usage + usage
    if cost is not None:
        state.cost = (state.cost or 0.0) + cost
    state.steps += 1
    trace = state.context.trace
    if trace is not None:
        doubt = {"usage_doubt": charged.doubt, "usage_raw": response.raw_usage}
        trace.emit(
            "model_call",
            agent,
            step=state.steps,
            model=model.name,
            response_model=response.extra.get("model"),
            response_id=response.extra.get("id"),
            tool_choice=choice_name(request),
            input_estimate=request.input_tokens,
            usage=usage.record(),
            reported=response.usage is not None and charged.doubt is None,
            finish_reason=response.finish_reason,
            duration_ms=round((time.perf_counter() - began) * 1000, 3),
            budget_remaining=state.budget.remaining,
            **({"cost": round(cost, 8)} if cost is not None else {}),
            **(
                {"budget_remaining_usd": state.budget.remaining_cost}
                if state.budget.caps_cost
                else {}
            ),
            **(doubt if charged.doubt else {}),
        )
    if charged.absurd:
        raise UntrustedUsage(f"{charged.doubt}; the run was stopped", provider=model.name)
    return response
