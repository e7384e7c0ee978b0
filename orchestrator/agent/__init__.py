"""The agent loop and what it needs: tools and their typed context, the calls of a turn, the
model call and its charging, the token budget and results.

Nothing here knows of skills, forks or jobs; they extend the loop from the layers above.
"""

from ..models.base import OutputMode
from .compaction import (
    COMPACTION_STRATEGIES,
    NOTE_CHARS,
    CompactionPlan,
    CompactionRequest,
    CompactionStrategy,
)
from .extension import Extension
from .loop import DEFAULT_MAX_STEPS, AgentLoop, ModelLike, RunState, run_sync
from .output import (
    DEFAULT_OUTPUT_RETRIES,
    FINAL_TOOL,
    OutputSpec,
    StructuredOutput,
    strict_schema,
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

__all__ = [
    "COMPACTION_STRATEGIES",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_OUTPUT_RETRIES",
    "FINAL_TOOL",
    "AgentLoop",
    "ApprovalRequest",
    "Approver",
    "ArgumentsError",
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
    "RunResult",
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
