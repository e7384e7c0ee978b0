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
(more if there is room, up to `want`). Each is an `Amount`: tokens and dollars, as the budget
counts them (a budget that caps no money leases no dollars: its clients only report them).

The whole-tree guarantee holds across the cluster: the host's budget counts every lease as
reserved until it is settled, and a client reserves only within what it holds, so the budget
is never overdrawn by more than what calls in flight reported beyond their reservation, as in
one process.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple, TypedDict

from ..agent import Reservation, TokenBudget
from ._ray import ray

LEASE_TOKENS = 16_000
UNLIMITED = 1 << 62
_TRIES = 3


class Amount(NamedTuple):
    """What crosses the wire for each quantity a budget counts."""

    tokens: int = 0
    cost: float = 0.0


class BudgetCounts(TypedDict):
    """The cluster budget's own counts, as `BudgetHost.state` reports them."""

    max_tokens: int | None
    used: int
    reserved: int
    remaining: int | None  # None: no token cap
    max_cost: float | None
    spent: float
    remaining_cost: float | None  # None: no money cap
    leases: dict[str, int]  # client -> tokens it holds


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
        self.reported: dict[str, Amount] = {}

    def exchange(
        self, client: str, spent: Amount, keep: Amount, need: Amount, want: Amount
    ) -> tuple[Amount, int | None, float | None]:
        """Settle `client`'s leases with `spent`, lease `keep` again plus `need` (up to `want`
        when there is room); returns what it now holds, and the tokens and dollars left to
        others (None: no cap)."""
        self._settle(client, Amount(*spent))
        keep, need, want = Amount(*keep), Amount(*need), Amount(*want)
        for extra in dict.fromkeys((self._room(need, want), need, Amount())):
            lease = self.budget.try_reserve(keep.tokens + extra.tokens, keep.cost + extra.cost)
            if lease is not None:
                self.leases[client] = [lease]
                return Amount(lease.tokens, lease.cost), *self._left()
        return Amount(), *self._left()

    def _room(self, need: Amount, want: Amount) -> Amount:
        """What to lease beyond `need`: no limit, one lease that never runs out; a limit, at
        most a quarter of what is left. Dollars only under a money cap."""
        tokens, cost = self.budget.remaining, self.budget.remaining_cost
        return Amount(
            UNLIMITED if tokens is None else max(need.tokens, min(want.tokens, tokens // 4)),
            0.0 if cost is None else max(need.cost, min(want.cost, cost / 4)),
        )

    def _left(self) -> tuple[int | None, float | None]:
        return self.budget.remaining, self.budget.remaining_cost

    def forfeit(self, client: str, spent_in_total: Amount | None) -> Amount:
        """A client that died: close its leases, charging what it spent and had not reported
        (`spent_in_total` minus what it reported; None, when nobody counted: all it held).
        Returns the charge."""
        leases = self.leases.get(client, [])
        if spent_in_total is None:
            charge = Amount(sum(r.tokens for r in leases), sum(r.cost for r in leases))
        else:
            total, reported = Amount(*spent_in_total), self.reported.get(client, Amount())
            charge = Amount(
                max(0, total.tokens - reported.tokens), max(0.0, total.cost - reported.cost)
            )
        self._settle(client, charge)
        return charge

    def record_spent(self, tokens: int, cost: float = 0.0) -> None:
        self.budget.record_spent(tokens, cost)

    def state(self) -> BudgetCounts:
        """The budget's counts (for the driver, and tests)."""
        b = self.budget
        return {
            "max_tokens": b.max_tokens,
            "used": b.used,
            "reserved": b.reserved,
            "remaining": b.remaining,
            "max_cost": b.max_cost,
            "spent": b.spent,
            "remaining_cost": b.remaining_cost,
            "leases": {c: sum(r.tokens for r in rs) for c, rs in self.leases.items() if rs},
        }

    def _settle(self, client: str, spent: Amount) -> None:
        leases = self.leases.pop(client, [])
        known = self.reported.get(client, Amount())
        self.reported[client] = Amount(known.tokens + spent.tokens, known.cost + spent.cost)
        tokens, cost = spent
        for index, lease in enumerate(leases):
            last = index == len(leases) - 1
            part = Amount(
                tokens if last else min(tokens, lease.tokens),
                cost if last else min(cost, lease.cost),
            )
            self.budget.settle(lease, part.tokens, part.cost)
            tokens, cost = tokens - part.tokens, cost - part.cost
        if not leases:  # nothing was leased: what was spent still counts
            self.budget.record_spent(tokens, cost)


def start_host(budget: TokenBudget) -> Any:
    """A budget host for `budget` on the cluster (no CPU of its own: it only counts)."""
    actor = ray.remote(num_cpus=0, max_restarts=0)(BudgetHost)
    return actor.remote(_Portable(budget))


class LeasedBudget(TokenBudget):
    """A budget whose tokens (and dollars) come from a `BudgetHost` in leases, served here.

    `used`, `reserved`, `spent` and `reserved_cost` are this client's, since it last
    reported; `remaining` is what the cluster had left at the last exchange plus what this
    client holds unreserved. Running out of its lease costs one (blocking) round trip to the
    host; `flush()` reports what was spent and gives back what no open reservation needs.
    """

    def __init__(self, host: Any, client: str, *, lease_tokens: int = LEASE_TOKENS) -> None:
        super().__init__(None)
        self.host = host
        self.client = client
        self.lease_tokens = lease_tokens
        self.held = Amount()
        self._others: tuple[int | None, float | None] = (None, None)
        self._wire = threading.Lock()
        self._exchange(Amount(), Amount())

    @property
    def caps_cost(self) -> bool:
        return self._others[1] is not None

    @property
    def remaining(self) -> int | None:
        others = self._others[0]
        return None if others is None else others + max(0, self._free().tokens)

    @property
    def remaining_cost(self) -> float | None:
        others = self._others[1]
        return None if others is None else others + max(0.0, self._free().cost)

    def try_reserve(self, tokens: int, cost: float = 0.0) -> Reservation | None:
        for _ in range(_TRIES):
            with self._lock:
                free = self._free()
                if free.tokens >= tokens and (not self.caps_cost or free.cost >= cost):
                    self.reserved += tokens
                    self.reserved_cost += cost
                    return Reservation(tokens, self, cost=cost)
                short = Amount(max(0, tokens - free.tokens), max(0.0, cost - free.cost))
                # Ask for as much again as is in flight: a busy worker comes back less often.
                want = Amount(
                    max(short.tokens, self.lease_tokens, self.reserved),
                    max(short.cost, self.reserved_cost),
                )
            if not self._exchange(short, want):
                return None
        return None

    def record_spent(self, tokens: int, cost: float = 0.0) -> None:
        self.host.record_spent.remote(max(0, tokens), max(0.0, cost))

    def state(self) -> BudgetCounts:
        """The cluster budget's own counts (`used`, `reserved`, `remaining`, leases)."""
        counts: BudgetCounts = ray.get(self.host.state.remote())
        return counts

    def flush(self) -> None:
        """Report what was spent and give back what open reservations do not need."""
        self._exchange(Amount(), Amount())

    def _free(self) -> Amount:
        held = self.held
        return Amount(
            held.tokens - self.used - self.reserved, held.cost - self.spent - self.reserved_cost
        )

    def _exchange(self, need: Amount, want: Amount) -> bool:
        """One round trip to the host; True if this client now holds `need` more than its open
        reservations and what it spent."""
        with self._wire:
            with self._lock:
                spent = Amount(self.used, self.spent)
                keep = Amount(self.reserved, self.reserved_cost)
            call = self.host.exchange.remote(self.client, spent, keep, need, want)
            held, *others = ray.get(call)
            with self._lock:
                self.used -= spent.tokens
                self.spent -= spent.cost
                self.held = Amount(*held)
                self._others = (others[0], others[1])
            got = self.held.tokens - keep.tokens >= need.tokens
            return got and (not self.caps_cost or self.held.cost - keep.cost >= need.cost - 1e-12)

    def __repr__(self) -> str:
        return f"LeasedBudget({self.client}, held={self.held}, used={self.used})"
