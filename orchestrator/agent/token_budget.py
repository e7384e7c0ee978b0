"""The token budget every model call of a run draws from, shared across tasks and threads.

A call reserves its input estimate plus its output reserve before it is made and settles what
the provider reports afterwards; `scoped(cap)` gives one agent a cap inside a shared budget.
A budget may also cap money (`max_cost`, US dollars): a call then reserves the most it could
cost and settles what it did cost, exactly as for tokens.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..errors import ConfigError


@dataclass(slots=True)
class Reservation:
    """Tokens set aside for one model call until it settles."""

    tokens: int
    budget: TokenBudget
    parent: Reservation | None = None
    open: bool = True
    cost: float = 0.0


class TokenBudget:
    """A token budget shared by every model call of a run, safe across tasks and threads.

    A call first reserves its input estimate plus its output reserve; once the provider reports
    what the call really used, it settles that. `scoped(cap)` makes a budget for one agent that
    is capped on its own and also charges this one, so a sub-agent's cap is never extra.
    """

    def __init__(
        self,
        max_tokens: int | None = None,
        *,
        parent: TokenBudget | None = None,
        max_cost: float | None = None,
    ) -> None:
        if max_tokens is not None and max_tokens < 0:
            raise ConfigError(f"max_tokens must be positive, got {max_tokens}")
        if max_cost is not None and max_cost < 0:
            raise ConfigError(f"max_cost must be positive, got {max_cost}")
        self.max_tokens = max_tokens
        self.max_cost = max_cost
        self.parent = parent
        self.used = 0
        self.reserved = 0
        self.spent = 0.0
        self.reserved_cost = 0.0
        self._lock = threading.Lock()

    @property
    def caps_cost(self) -> bool:
        """Whether this budget or one above caps money."""
        return self.max_cost is not None or (self.parent is not None and self.parent.caps_cost)

    @property
    def remaining_cost(self) -> float | None:
        """Dollars neither spent nor reserved, here and above; None if money is not capped."""
        own = (
            None
            if self.max_cost is None
            else max(0.0, self.max_cost - self.spent - self.reserved_cost)
        )
        above = self.parent.remaining_cost if self.parent else None
        if own is None or above is None:
            return own if above is None else above
        return min(own, above)

    @property
    def remaining(self) -> int | None:
        """Tokens neither used nor reserved, here and in every budget above; None if unlimited."""
        own = (
            None if self.max_tokens is None else max(0, self.max_tokens - self.used - self.reserved)
        )
        above = self.parent.remaining if self.parent else None
        if own is None or above is None:
            return own if above is None else above
        return min(own, above)

    def try_reserve(self, tokens: int, cost: float = 0.0) -> Reservation | None:
        """Set `tokens` (and `cost` dollars) aside, or return None if this budget or one above
        cannot cover them."""
        parent, parent_reservation = self.parent, None
        if parent is not None:
            parent_reservation = parent.try_reserve(tokens, cost)
            if parent_reservation is None:
                return None
        with self._lock:
            over_tokens = (
                self.max_tokens is not None and self.used + self.reserved + tokens > self.max_tokens
            )
            over_cost = (
                self.max_cost is not None
                and self.spent + self.reserved_cost + cost > self.max_cost + 1e-12
            )
            covered = not (over_tokens or over_cost)
            if covered:
                self.reserved += tokens
                self.reserved_cost += cost
        if not covered:
            if parent is not None and parent_reservation is not None:
                parent.release(parent_reservation)
            return None
        return Reservation(tokens, self, parent_reservation, cost=cost)

    def record_spent(self, tokens: int, cost: float = 0.0) -> None:
        """Count tokens (and dollars) spent before this budget existed (the earlier attempts
        of a resumed run) as used, here only: a budget above counts them on its own."""
        with self._lock:
            self.used += max(0, tokens)
            self.spent += max(0.0, cost)

    def charge(self, tokens: int, cost: float = 0.0) -> None:
        """Count tokens (and dollars) spent without a reservation, here and in every budget
        above: what a remote agent reports it used, known only once its task has ended. It
        may take a budget past its cap by that much; no call starts once nothing is left."""
        with self._lock:
            self.used += max(0, tokens)
            self.spent += max(0.0, cost)
        if self.parent is not None:
            self.parent.charge(tokens, cost)

    def settle(self, reservation: Reservation, used: int, cost: float = 0.0) -> None:
        """Replace a reservation by what the call really used (and cost)."""
        self._close(reservation, used, cost)

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back unused (the call never happened)."""
        self._close(reservation, 0, 0.0)

    def _close(self, reservation: Reservation, used: int, cost: float) -> None:
        if reservation.budget is not self:
            raise ValueError("reservation belongs to another budget")
        with self._lock:
            if not reservation.open:
                return
            reservation.open = False
            self.reserved -= reservation.tokens
            self.reserved_cost -= reservation.cost
            self.used += used
            self.spent += cost
        if reservation.parent is not None:
            reservation.parent.budget._close(reservation.parent, used, cost)

    def scoped(self, max_tokens: int | None, max_cost: float | None = None) -> TokenBudget:
        """A budget capped at `max_tokens` (and `max_cost`) that also draws from this one."""
        return TokenBudget(max_tokens, parent=self, max_cost=max_cost)

    def __repr__(self) -> str:
        cost = f", max_cost={self.max_cost}, spent={self.spent:.6f}" if self.max_cost else ""
        return (
            f"TokenBudget(max={self.max_tokens}, used={self.used}, reserved={self.reserved}{cost})"
        )
