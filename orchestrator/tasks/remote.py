"""Choosing where tasks run: the local executor is the default; Ray only when asked for.

`ray_executor(...)` imports the Ray package only when called, so `import orchestrator` never
imports Ray, and a run that asks for Ray without the `[ray]` extra gets a `ConfigError` that
names the extra (`pip install 'orchestrator[ray]'`).
"""

from __future__ import annotations

from typing import Any


def ray_executor(address: str | None = None, **settings: Any) -> Any:
    """A `RayExecutor` for the cluster at `address` (docs/ray.md)."""
    from .ray import RayExecutor  # raises ConfigError naming the extra when Ray is missing

    return RayExecutor(address, **settings)
