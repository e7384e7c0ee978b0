"""Deprecated: the Ray executor is `orchestrator.ray` now (an optional part of the package).

`from orchestrator.tasks.ray import RayExecutor` still works for one release, with a
DeprecationWarning. The core never imports Ray: this module loads it by name.
"""

from __future__ import annotations

import importlib
import warnings

warnings.warn("orchestrator.tasks.ray is now orchestrator.ray", DeprecationWarning, stacklevel=2)


def __getattr__(name: str) -> object:
    return getattr(importlib.import_module("orchestrator.ray"), name)
