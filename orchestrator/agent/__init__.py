"""The agent loop and what it needs: tools and their typed context, the calls of a turn, the
model call and its charging, the token budget and results.

Nothing here knows of skills, forks or jobs; they extend the loop from the layers above.
Structured answers (output.py: `OutputSpec`, `StructuredOutput`, ...) are imported on first use
(PEP 562): an agent without an output type never loads them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..models.base import OutputMode
from .compaction import (
    COMPACTION_STRATEGIES,
    NOTE_CHARS,
    CompactionPlan,
    CompactionRequest,
    CompactionStrategy,
)
from .extension import Extension
from .loop import (
    DEFAULT_MAX_STEPS,
    DEFAULT_OUTPUT_RETRIES,
    AgentLoop,
    AgentOptions,
    CancelHandle,
    ModelLike,
    RunCancelled,
    RunSettings,
    RunState,
    run_sync,
)
from .run_results import RunResult, Status, TaskResult, TaskStatus
from .token_budget import Reservation, TokenBudget
from .tools import (
    ApprovalRequest,
    Approver,
    ArgumentsError,
    Guard,
    Preapproval,
    Preapprover,
    Refusal,
    Tool,
    ToolContext,
    Toolset,
    as_tool,
    render_result,
    tool,
)

if TYPE_CHECKING:
    from .output import FINAL_TOOL, OutputSpec, StructuredOutput, strict_schema

_OUTPUT = ("FINAL_TOOL", "OutputSpec", "StructuredOutput", "strict_schema")

__all__ = [
    "COMPACTION_STRATEGIES",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_OUTPUT_RETRIES",
    "FINAL_TOOL",
    "AgentLoop",
    "AgentOptions",
    "ApprovalRequest",
    "Approver",
    "ArgumentsError",
    "CancelHandle",
    "CompactionPlan",
    "CompactionRequest",
    "CompactionStrategy",
    "Extension",
    "Guard",
    "ModelLike",
    "NOTE_CHARS",
    "OutputMode",
    "OutputSpec",
    "Preapproval",
    "Preapprover",
    "Refusal",
    "Reservation",
    "RunCancelled",
    "RunResult",
    "RunSettings",
    "RunState",
    "Status",
    "StructuredOutput",
    "TaskResult",
    "TaskStatus",
    "TokenBudget",
    "Tool",
    "ToolContext",
    "Toolset",
    "as_tool",
    "render_result",
    "run_sync",
    "strict_schema",
    "tool",
]


def __getattr__(name: str) -> Any:
    if name not in _OUTPUT:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(".output", __name__), name)
    globals()[name] = value
    return value
