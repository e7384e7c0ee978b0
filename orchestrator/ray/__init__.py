"""Running tasks on a Ray cluster: `RayExecutor`, one budget and one trace across workers.

An optional part of the package: it imports the core, and the core never imports it (a job
spec's `executor: ray` loads it by name, `planner.executor_for`). Importing it imports Ray;
without the `[ray]` extra it raises a `ConfigError` naming the extra. See docs/ray.md.
"""

from .budget import LEASE_TOKENS, BudgetHost, LeasedBudget
from .executor import RayExecutor, RaySession, RayTaskExecutor
from .recipe import WorkerRecipe
from .relay import RelayTrace, TraceRelay
from .worker import TaskWorker

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
]
