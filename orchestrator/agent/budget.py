"""The token budget every model call of a run draws from, shared across tasks and threads.

A call reserves its input estimate plus its output reserve before it is made and settles what
the provider reports afterwards; `scoped(cap)` gives one agent a cap inside a shared budget.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..errors import ConfigError


@dataclass
class Reservation:
    """Tokens set aside for one model call until it settles."""

    tokens: int
    budget: TokenBudget
    parent: Reservation | None = None
    open: bool = True


class TokenBudget:
    """A token budget shared by every model call of a run, safe across tasks and threads.

    A call first reserves its input estimate plus its output reserve; once the provider reports
    what the call really used, it settles that. `scoped(cap)` makes a budget for one agent that
    is capped on its own and also charges this one, so a sub-agent's cap is never extra.
    """

    def __init__(self, max_tokens: int | None = None, *, parent: TokenBudget | None = None) -> None:
        if max_tokens is not None and max_tokens < 0:
            raise ConfigError(f"max_tokens must be positive, got {max_tokens}")
        self.max_tokens = max_tokens
        self.parent = parent
        self.used = 0
        self.reserved = 0
        self._lock = threading.Lock()

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

    def try_reserve(self, tokens: int) -> Reservation | None:
        """Set `tokens` aside, or return None if this budget or one above cannot cover them."""
        parent, parent_reservation = self.parent, None
        if parent is not None:
            parent_reservation = parent.try_reserve(tokens)
            if parent_reservation is None:
                return None
        with self._lock:
            if self.max_tokens is not None and self.used + self.reserved + tokens > self.max_tokens:
                covered = False
            else:
                self.reserved += tokens
                covered = True
        if not covered:
            if parent is not None and parent_reservation is not None:
                parent.release(parent_reservation)
            return None
        return Reservation(tokens, self, parent_reservation)

    def record_spent(self, tokens: int) -> None:
        """Count tokens spent before this budget existed (the earlier attempts of a resumed
        run) as used, here only: a budget above counts them on its own."""
        with self._lock:
            self.used += max(0, tokens)

    def settle(self, reservation: Reservation, used: int) -> None:
        """Replace a reservation by what the call really used."""
        self._close(reservation, used)

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back unused (the call never happened)."""
        self._close(reservation, 0)

    def _close(self, reservation: Reservation, used: int) -> None:
        if reservation.budget is not self:
            raise ValueError("reservation belongs to another budget")
        with self._lock:
            if not reservation.open:
                return
            reservation.open = False
            self.reserved -= reservation.tokens
            self.used += used
        if reservation.parent is not None:
            reservation.parent.budget._close(reservation.parent, used)

    def scoped(self, max_tokens: int | None) -> TokenBudget:
        """A budget capped at `max_tokens` that also draws from this one."""
        return TokenBudget(max_tokens, parent=self)

    def __repr__(self) -> str:
        return f"TokenBudget(max={self.max_tokens}, used={self.used}, reserved={self.reserved})"
