"""Ray itself, imported only here: without the `[ray]` extra, using it is a clear error."""

from __future__ import annotations

import os

from ..errors import ConfigError

RAY_MISSING = "the Ray executor needs Ray, which is not installed: pip install 'orchestrator[ray]'"

try:
    import ray
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ConfigError(RAY_MISSING) from exc

# No usage statistics leave the machine, whoever starts Ray.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

__all__ = ["RAY_MISSING", "ray"]
