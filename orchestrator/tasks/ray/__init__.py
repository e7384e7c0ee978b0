"""Running tasks on a Ray cluster: `RayExecutor`, one budget and one trace across workers.

Importing this package imports Ray; without the `[ray]` extra it raises a `ConfigError`
naming the extra. Nothing else in the library imports it, except when a run asks for Ray.
See docs/ray.md.
"""

from .budget import LEASE_TOKENS, BudgetHost, LeasedBudget
from .executor import RayExecutor, RaySession, RayTaskExecutor
from .relay import RelayTrace, TraceRelay
from .worker import AgentRecipe, TaskWorker

__all__ = [
    "LEASE_TOKENS",
    "AgentRecipe",
    "BudgetHost",
    "LeasedBudget",
    "RayExecutor",
    "RaySession",
    "RayTaskExecutor",
    "RelayTrace",
    "TaskWorker",
    "TraceRelay",
]
