"""Running tasks on a Ray cluster: `RayExecutor`, one budget and one trace across workers.

An optional part of the package: it imports the core, and the core never imports it. A job
spec's `executor: ray` finds `from_spec` through the package's entry points
(orchestrator/parts.py). Importing it imports Ray; without the `[ray]` extra it raises a
`ConfigError` naming the extra. See docs/ray.md.
"""

from ..jobs import Executor
from .budget import LEASE_TOKENS, BudgetHost, LeasedBudget
from .executor import RayExecutor, RaySession, RayTaskExecutor
from .recipe import WorkerRecipe
from .relay import RelayTrace, TraceRelay
from .worker import TaskWorker


def from_spec(spec: Executor) -> RayExecutor:
    """The executor a job spec's `executor: ray` asks for."""
    return RayExecutor(spec.address, workers=spec.workers)


__all__ = [
    "LEASE_TOKENS",
    "BudgetHost",
    "LeasedBudget",
    "RayExecutor",
    "RaySession",
    "RayTaskExecutor",
    "RelayTrace",
    "TaskWorker",
    "TraceRelay",
    "WorkerRecipe",
    "from_spec",
]
