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
    ON_INPUT,
    Answerer,
    ApprovalRequest,
    Approver,
    ArgumentsError,
    Guard,
    InputRefused,
    OnInput,
    Preapproval,
    Preapprover,
    Refusal,
    Tool,
    ToolContext,
    Toolset,
    WaitingForInput,
    as_tool,
    render_result,
    tool,
)

if TYPE_CHECKING:
    from .output import FINAL_TOOL, OutputSpec, StructuredOutput, strict_schema
    from .waiting import (
        AnswerRefused,
        answer_for,
        check_answer,
        give_answers,
        new_request,
        request_lines,
    )

_OUTPUT = ("FINAL_TOOL", "OutputSpec", "StructuredOutput", "strict_schema")
_WAITING = (
    "AnswerRefused",
    "answer_for",
    "check_answer",
    "give_answers",
    "new_request",
    "request_lines",
)
"""Names of agent/waiting.py: loaded when first asked for (by a run that waits, a resume)."""

__all__ = [
    "COMPACTION_STRATEGIES",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_OUTPUT_RETRIES",
    "FINAL_TOOL",
    "AgentLoop",
    "AgentOptions",
    "AnswerRefused",
    "Answerer",
    "ApprovalRequest",
    "Approver",
    "ArgumentsError",
    "CancelHandle",
    "CompactionPlan",
    "CompactionRequest",
    "CompactionStrategy",
    "Extension",
    "Guard",
    "InputRefused",
    "ModelLike",
    "NOTE_CHARS",
    "ON_INPUT",
    "OnInput",
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
    "WaitingForInput",
    "answer_for",
    "as_tool",
    "check_answer",
    "give_answers",
    "new_request",
    "render_result",
    "request_lines",
    "run_sync",
    "strict_schema",
    "tool",
]


def __getattr__(name: str) -> Any:
    if name not in _OUTPUT and name not in _WAITING:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = ".output" if name in _OUTPUT else ".waiting"
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
