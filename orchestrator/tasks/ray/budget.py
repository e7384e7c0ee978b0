"""One budget across a Ray cluster: the run's budget hosted by an actor, leased to clients.

`BudgetHost` (a Ray actor) holds the run's own budget object, copied whole from the driver (a
`TokenBudget`, with whatever it counts), and only forwards reserve, settle and release to it:
the accounting is the budget's own, never done again here. A `LeasedBudget` (one per worker,
and one on the driver) takes a block of tokens from the host as a single reservation (a lease)
and serves its agents' reservations from it locally, so a model call does not wait on a round
trip; when the block runs out it goes back for more, and at the end of each task it gives the
unused part back.

The wire is one call, `exchange(client, spent, keep, need, want)`: the client reports what it
spent since it last reported, keeps what backs its open reservations, and asks for `need`
(more if there is room, up to `want`). Each of those is a plain number of tokens today; a
money budget adds one number beside each (the host forwards them to its budget as it is).

The whole-tree guarantee holds across the cluster: the host's budget counts every lease as
reserved until it is settled, and a client reserves only within what it holds, so the budget
is never overdrawn by more than what calls in flight reported beyond their reservation, as in
one process.
"""

from __future__ import annotations

import threading
from typing import Any

from ...agent import Reservation, TokenBudget
from ._ray import ray

LEASE_TOKENS = 16_000
UNLIMITED = 1 << 62
_TRIES = 3


def _is_lock(value: Any) -> bool:
    return type(value) in (type(threading.Lock()), type(threading.RLock()))


class _Portable:
    """Pickles a budget without its locks (they are made anew on the other side)."""

    def __init__(self, budget: TokenBudget) -> None:
        self.cls = type(budget)
        self.state = {k: v for k, v in vars(budget).items() if not _is_lock(v)}
        self.locks = [k for k, v in vars(budget).items() if _is_lock(v)]

    def restore(self) -> TokenBudget:
        budget = self.cls.__new__(self.cls)
        budget.__dict__.update(self.state)
        for key in self.locks:
            setattr(budget, key, threading.Lock())
        return budget


class BudgetHost:
    """The run's budget on the cluster (a Ray actor; its calls run one at a time)."""

    def __init__(self, budget: _Portable) -> None:
        self.budget = budget.restore()
        self.leases: dict[str, list[Reservation]] = {}
        self.reported: dict[str, int] = {}

    def exchange(
        self, client: str, spent: int, keep: int, need: int, want: int
    ) -> tuple[int, int | None]:
        """Settle `client`'s leases with `spent`, lease `keep` again plus `need` (up to `want`
        when there is room); returns the tokens it now holds and what is left to others."""
        self._settle(client, spent)
        remaining = self.budget.remaining
        # No limit: one lease that never runs out. A limit: at most a quarter of what is left.
        room = UNLIMITED if remaining is None else max(need, min(want, remaining // 4))
        for extra in dict.fromkeys((room, need, 0)):
            lease = self.budget.try_reserve(keep + extra)
            if lease is not None:
                self.leases[client] = [lease]
                return keep + extra, self.budget.remaining
        return 0, self.budget.remaining

    def forfeit(self, client: str, spent_in_total: int | None) -> int:
        """A client that died: close its leases, charging what it spent and had not reported
        (`spent_in_total` minus what it reported; None, when nobody counted: all it held).
        Returns the charge."""
        held = sum(lease.tokens for lease in self.leases.get(client, []))
        if spent_in_total is None:
            unreported = held
        else:
            unreported = max(0, spent_in_total - self.reported.get(client, 0))
        self._settle(client, unreported)
        return unreported

    def record_spent(self, tokens: int) -> None:
        self.budget.record_spent(tokens)

    def state(self) -> dict[str, Any]:
        """The budget's counts (for the driver, and tests)."""
        return {
            "max_tokens": self.budget.max_tokens,
            "used": self.budget.used,
            "reserved": self.budget.reserved,
            "remaining": self.budget.remaining,
            "leases": {c: sum(r.tokens for r in rs) for c, rs in self.leases.items() if rs},
        }

    def _settle(self, client: str, spent: int) -> None:
        leases = self.leases.pop(client, [])
        self.reported[client] = self.reported.get(client, 0) + spent
        left = spent
        for index, lease in enumerate(leases):
            part = left if index == len(leases) - 1 else min(left, lease.tokens)
            self.budget.settle(lease, part)
            left -= part
        if left > 0:  # nothing was leased: what was spent still counts
            self.budget.record_spent(left)


def start_host(budget: TokenBudget) -> Any:
    """A budget host for `budget` on the cluster (no CPU of its own: it only counts)."""
    actor = ray.remote(num_cpus=0, max_restarts=0)(BudgetHost)
    return actor.remote(_Portable(budget))


class LeasedBudget(TokenBudget):
    """A budget whose tokens come from a `BudgetHost` in leases, served locally.

    `used` and `reserved` are this client's, since it last reported; `remaining` is what the
    cluster had left at the last exchange plus what this client holds unreserved. Running out
    of its lease costs one (blocking) round trip to the host; `flush()` reports what was spent
    and gives back what no open reservation needs.
    """

    def __init__(self, host: Any, client: str, *, lease_tokens: int = LEASE_TOKENS) -> None:
        super().__init__(None)
        self.host = host
        self.client = client
        self.lease_tokens = lease_tokens
        self.held = 0
        self.spent = 0  # every token this client spent, reported or not
        self._others: int | None = None
        self._wire = threading.Lock()
        self._exchange(0, 0)

    @property
    def remaining(self) -> int | None:
        if self._others is None:
            return None
        return self._others + max(0, self.held - self.used - self.reserved)

    def try_reserve(self, tokens: int) -> Reservation | None:
        for _ in range(_TRIES):
            with self._lock:
                if self.held - self.used - self.reserved >= tokens:
                    self.reserved += tokens
                    return Reservation(tokens, self)
                short = tokens - (self.held - self.used - self.reserved)
                # Ask for as much again as is in flight: a busy worker comes back less often.
                want = max(short, self.lease_tokens, self.reserved)
            if not self._exchange(short, want):
                return None
        return None

    def _close(self, reservation: Reservation, used: int) -> None:
        was_open = reservation.open
        super()._close(reservation, used)
        if was_open:
            with self._lock:
                self.spent += used

    def record_spent(self, tokens: int) -> None:
        self.host.record_spent.remote(max(0, tokens))

    def state(self) -> dict[str, Any]:
        """The cluster budget's own counts (`used`, `reserved`, `remaining`, leases)."""
        return ray.get(self.host.state.remote())

    def flush(self) -> None:
        """Report what was spent and give back what open reservations do not need."""
        self._exchange(0, 0)

    def _exchange(self, need: int, want: int) -> bool:
        """One round trip to the host; True if this client now holds `need` more than its open
        reservations and what it spent."""
        with self._wire:
            with self._lock:
                spent, keep = self.used, self.reserved
            held, others = ray.get(self.host.exchange.remote(self.client, spent, keep, need, want))
            with self._lock:
                self.used -= spent
                self.held = held
                self._others = others
            return held - keep >= need

    def __repr__(self) -> str:
        return f"LeasedBudget({self.client}, held={self.held}, used={self.used})"
