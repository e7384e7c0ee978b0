"""Deprecated: the OpenTelemetry span sink is `orchestrator.telemetry.spans` now (an optional
part of the package). `from orchestrator.trace.spans import SpanSink` still works for one
release, with a DeprecationWarning. The trace never imports it: this module loads it by name.
"""

from __future__ import annotations

import importlib
import warnings

warnings.warn(
    "orchestrator.trace.spans is now orchestrator.telemetry.spans", DeprecationWarning, stacklevel=2
)


def __getattr__(name: str) -> object:
    return getattr(importlib.import_module("orchestrator.telemetry.spans"), name)
