"""Deprecated: import `ApprovalRequest`, `Approver`, `Guard`, `Refusal` from `orchestrator.agent`.

Admitting a call (guards, then a person's approval) is part of running a turn's calls
(`orchestrator/agent/turn_calls.py`); its types are those of the tool context
(`orchestrator/agent/tools.py`). This module re-exports them for one release.
"""

from __future__ import annotations

import warnings

from .tools import ApprovalRequest, Approver, Guard, Refusal
from .turn_calls import NOBODY, admit

__all__ = ["NOBODY", "ApprovalRequest", "Approver", "Guard", "Refusal", "admit"]

warnings.warn(
    "orchestrator.agent.approval is deprecated and goes in the next release: import "
    "ApprovalRequest, Approver, Guard and Refusal from orchestrator.agent",
    DeprecationWarning,
    stacklevel=2,
)
