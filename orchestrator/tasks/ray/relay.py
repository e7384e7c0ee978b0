"""One trace across the cluster: workers relay their events to the driver's trace.

A worker's agents write to a `RelayTrace`, which keeps each event for the relay (and numbers
it locally, which nothing reads). A batch goes to the `TraceRelay` actor every `FLUSH_SECONDS`,
and at the end of each task before its result goes back. The driver's `RelayPump` drains the
relay and writes each event into the run's own trace, where it gets its `seq` and run id like
any other, plus `worker`: the worker that ran it (its `ts` stays the worker's: when it
happened). Batches from one worker arrive in the order they were sent (one caller, one actor),
and an agent runs on one worker, so each agent's events keep their order; the pump drains the
relay once more before a task's result is recorded, so a task's events come before its
`task_end`.

The pump also adds up the usage of the `model_call` events per worker and per agent: what a
worker that died had spent comes from there (executor.py).
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from typing import Any

from ...messages import Usage
from ...trace import Checkpoint, Event, Trace
from ._ray import ray

FLUSH_SECONDS = 0.05
PUMP_SECONDS = 0.02
_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False)
Relayed = tuple[str, str, str, str]  # worker, type, agent, fields as JSON


class TraceRelay:
    """Holds relayed events until the driver takes them (a Ray actor, calls one at a time)."""

    def __init__(self) -> None:
        self.events: list[Relayed] = []

    def push(self, worker: str, batch: list[tuple[str, str, str]]) -> None:
        self.events.extend((worker, *event) for event in batch)

    def drain(self) -> list[Relayed]:
        events, self.events = self.events, []
        return events


def start_relay() -> Any:
    return ray.remote(num_cpus=0, max_restarts=0)(TraceRelay).remote()


class RelayTrace(Trace):
    """A worker's trace: no file, every event kept for the relay (its run's id and checkpoint
    are the driver's, so resumed agents find their earlier attempts)."""

    def __init__(self, relay: Any, worker: str, run_id: str, checkpoint: Checkpoint | None) -> None:
        super().__init__(None, run_id=run_id, resume=checkpoint)
        self.relay = relay
        self.worker = worker
        self._batch: list[tuple[str, str, str]] = []

    def emit(self, type: str, agent: str, **fields: Any) -> Event:
        event = super().emit(type, agent, **fields)
        # JSON now, as the file would have it: a field Ray could not pickle cannot stop a batch.
        # The time is the worker's: when it happened, not when it reached the driver.
        self._batch.append((type, agent, _ENCODER.encode({**fields, "ts": event["ts"]})))
        return event

    async def flush(self) -> None:
        """Send what was emitted since the last flush, and wait until the relay has it."""
        batch, self._batch = self._batch, []
        await self.relay.push.remote(self.worker, batch)

    async def keep_flushing(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            if self._batch:
                await self.flush()


class RelayPump:
    """Writes relayed events into the driver's trace; counts what each worker spent."""

    def __init__(self, relay: Any, trace: Trace) -> None:
        self.relay = relay
        self.trace = trace
        self.spent_by_worker: dict[str, int] = defaultdict(int)
        self.usage_by_agent: dict[str, Usage] = {}
        self._lock = asyncio.Lock()

    async def drain(self) -> None:
        async with self._lock:  # one drain at a time: events are written in the order taken
            for worker, type, agent, encoded in await self.relay.drain.remote():
                fields = json.loads(encoded)
                if type == "model_call" and isinstance(fields.get("usage"), dict):
                    self._count(worker, agent, Usage.model_validate(fields["usage"]))
                self.trace.emit(type, agent, **{**fields, "worker": worker})

    async def run(self) -> None:
        while True:
            await self.drain()
            await asyncio.sleep(PUMP_SECONDS)

    def usage_under(self, path: str) -> Usage:
        """What the agent at `path` and every agent under it spent, as relayed so far."""
        mine = [u for a, u in self.usage_by_agent.items() if a == path or a.startswith(f"{path}/")]
        return sum(mine, Usage())

    def _count(self, worker: str, agent: str, usage: Usage) -> None:
        self.spent_by_worker[worker] += usage.total_tokens
        known = self.usage_by_agent.get(agent)
        self.usage_by_agent[agent] = usage if known is None else known + usage
