"""Deprecated: the HTML report is `orchestrator.report` now (an optional part of the package).

`from orchestrator.trace.report import write_report` still works for one release, with a
DeprecationWarning. The trace never imports the report: this module loads it by name.
"""

from __future__ import annotations

import importlib
import warnings

warnings.warn(
    "orchestrator.trace.report is now orchestrator.report", DeprecationWarning, stacklevel=2
)


def __getattr__(name: str) -> object:
    return getattr(importlib.import_module("orchestrator.report"), name)
