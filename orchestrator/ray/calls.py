"""A run's count of the tasks it sends remote agents, kept for the whole cluster.

A remote agent's `max_calls` caps the tasks one run sends it, its whole tree counted together
(tasks/executor.py: `RemoteCalls`). In one process the count is an object its agents share;
a run on Ray has agents in several processes, so the count lives in one small actor per run
(`CallsHost`), and every process of the run (the driver and each worker) counts through a
`ClusterCalls` that asks it. Taking a call is one round trip, made only as a task is sent to
a remote agent; the check before a task starts reads the count last seen here.
"""

from __future__ import annotations

from typing import Any

from ..tasks.executor import RemoteCalls
from ._ray import ray


class CallsHost:
    """The run's counts, by remote agent (a Ray actor: its calls run one at a time)."""

    def __init__(self) -> None:
        self.calls = RemoteCalls()

    def take(self, agent: str, cap: int | None) -> tuple[bool, int]:
        """Count one more task sent to `agent` unless `cap` is reached; whether it was
        counted, and the count after."""
        return self.calls.take_here(agent, cap), self.calls.count(agent)


def start_calls_host() -> Any:
    """A new run's count on the cluster."""
    return ray.remote(CallsHost).options(num_cpus=0, max_restarts=0).remote()


class ClusterCalls(RemoteCalls):
    """The run's count, kept by its `CallsHost` actor (`host`)."""

    def __init__(self, host: Any) -> None:
        super().__init__()
        self.host = host

    async def take(self, agent: str, cap: int | None) -> bool:
        taken, sent = await self.host.take.remote(agent, cap)
        self.sent[agent] = sent
        return bool(taken)
