"""One trace across the cluster: workers relay their events to the driver's trace.

A worker's agents write to a `RelayTrace`, which keeps each event for the driver (and numbers
it locally, which nothing reads). Events leave a worker in numbered batches: every
`FLUSH_SECONDS` one goes to the `TraceRelay` actor, and when a task ends the batch so far
rides back with its result. The driver's `RelayPump` takes batches from both ways and writes
each worker's batches in their numbered order into the run's own trace, where each event
gets its `seq` and run id like any other, plus `worker`: the worker that ran it (its `ts`
stays the worker's: when it happened). An agent runs on one worker, so each agent's events
keep their order, and a task's `task_end` is written only once its batch is: after every
event of the task.

The pump also adds up the usage (and cost) of the `model_call` events per worker and per
agent: what a worker that died had spent comes from there (executor.py).
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from ..events import TraceEvent, event_or_problem
from ..messages import Usage
from ..trace import Checkpoint, Trace
from ._ray import ray
from .budget import Amount

FLUSH_SECONDS = 0.05
PUMP_SECONDS = 0.05
Batch = tuple[int, list[str]]  # its number (from 0, per worker), its events' lines
E = TypeVar("E", bound=TraceEvent)
_WORKERS_OWN = ("seq", "run", "attempt", "schema", "mac")
"""What a worker's trace gave a line that the driver's trace gives again."""


class TraceRelay:
    """Holds relayed batches until the driver takes them (a Ray actor, calls one at a time)."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, Batch]] = []

    def push(self, worker: str, batch: Batch) -> None:
        self.batches.append((worker, batch))

    def drain(self) -> list[tuple[str, Batch]]:
        batches, self.batches = self.batches, []
        return batches


def start_relay() -> Any:
    return ray.remote(num_cpus=0, max_restarts=0)(TraceRelay).remote()


class RelayTrace(Trace):
    """A worker's trace: no file, every event kept for the driver (its run's id and
    checkpoint are the driver's, so resumed agents find their earlier attempts)."""

    def __init__(self, relay: Any, worker: str, run_id: str, checkpoint: Checkpoint | None) -> None:
        super().__init__(None, run_id=run_id, resume=checkpoint)
        self.relay = relay
        self.worker = worker
        self._events: list[str] = []
        self._number = 0

    def record(self, event: E) -> E:
        recorded = super().record(event)
        # Its line now, as the file would have it: nothing Ray could not pickle goes in a
        # batch. The time is the worker's: when it happened, not when it reached the driver.
        self._events.append(recorded.as_json())
        return recorded

    def record_unread(self, kind: str, fields: Mapping[str, Any], problem: str) -> str:
        line = super().record_unread(kind, fields, problem)
        self._events.append(line)  # the driver writes it too, and counts it
        return line

    def take(self) -> Batch:
        """The events since the last batch, as the next batch."""
        batch = (self._number, self._events)
        self._number += 1
        self._events = []
        return batch

    async def keep_flushing(self) -> None:
        """Send a batch to the relay every `FLUSH_SECONDS` (when there is one)."""
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            if self._events:
                await self.relay.push.remote(self.worker, self.take())


class RelayPump:
    """Writes relayed batches into the driver's trace, each worker's in order; counts what
    each worker spent."""

    def __init__(self, relay: Any, trace: Trace) -> None:
        self.relay = relay
        self.trace = trace
        self.spent_by_worker: dict[str, Amount] = defaultdict(Amount)
        self.usage_by_agent: dict[str, Usage] = {}
        self._next: dict[str, int] = defaultdict(int)
        self._waiting: dict[str, dict[int, list[str]]] = defaultdict(dict)
        self._wake = asyncio.Event()
        self._written = asyncio.Condition()

    async def accept(self, worker: str, batch: Batch) -> None:
        """Write `batch` (one that came back with a task's result) once the batches before
        it are written; returns when it is."""
        number, _ = batch
        await self._put(worker, batch)
        if self._next[worker] <= number:
            self._wake.set()  # a batch before it is still with the relay
            async with self._written:
                await self._written.wait_for(lambda: self._next[worker] > number)

    async def drain(self) -> None:
        """Take what the relay holds and write what can be written."""
        for worker, batch in await self.relay.drain.remote():
            await self._put(worker, batch)

    def release(self, worker: str) -> None:
        """A worker that died: write what it sent, in order, gaps and all."""
        for _, events in sorted(self._waiting.pop(worker, {}).items()):
            self._write(worker, events)

    async def run(self) -> None:
        """Drain every `PUMP_SECONDS`, or at once when a task's batch waits for another."""
        while True:
            await self.drain()
            try:  # not `asyncio.wait_for`, which can drop a cancellation (model_call.py)
                async with asyncio.timeout(PUMP_SECONDS):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()

    def usage_under(self, path: str) -> Usage:
        """What the agent at `path` and every agent under it spent, as relayed so far."""
        mine = [u for a, u in self.usage_by_agent.items() if a == path or a.startswith(f"{path}/")]
        return sum(mine, Usage())

    async def _put(self, worker: str, batch: Batch) -> None:
        number, events = batch
        self._waiting[worker][number] = events
        wrote = False
        while self._next[worker] in self._waiting[worker]:
            self._write(worker, self._waiting[worker].pop(self._next[worker]))
            self._next[worker] += 1
            wrote = True
        if wrote:
            async with self._written:
                self._written.notify_all()

    def _write(self, worker: str, lines: list[str]) -> None:
        for line in lines:
            fields = json.loads(line)
            for own in _WORKERS_OWN:
                fields.pop(own, None)
            fields["worker"] = worker
            if fields.get("type") == "model_call":  # spent, whether the driver reads it or not
                self._count_call(worker, fields)
            event, problem = event_or_problem({**fields, "seq": 0})
            if event is None:  # a kind or shape this process does not know: written as it came
                self.trace.record_unread(str(fields.get("type")), fields, str(problem))
                continue
            self.trace.record(event)

    def _count_call(self, worker: str, fields: dict[str, Any]) -> None:
        usage, cost, agent = fields.get("usage"), fields.get("cost"), fields.get("agent")
        if not isinstance(usage, dict) or not isinstance(agent, str):
            return
        try:
            spent = Usage.model_validate(usage)
        except ValidationError:
            return
        self._count(worker, agent, spent, float(cost) if isinstance(cost, int | float) else 0.0)

    def _count(self, worker: str, agent: str, usage: Usage, cost: float) -> None:
        known_spend = self.spent_by_worker[worker]
        self.spent_by_worker[worker] = Amount(
            known_spend.tokens + usage.total_tokens, known_spend.cost + cost
        )
        known = self.usage_by_agent.get(agent)
        self.usage_by_agent[agent] = usage if known is None else known + usage
