"""The agent loop and what it needs: tools, the tool batch, the token budget and results.

Nothing here knows of skills, forks or jobs; they extend the loop from the layers above.
"""

from .budget import Reservation, TokenBudget
from .extension import Extension
from .loop import AgentLoop, ModelLike
from .results import RunResult, Status, TaskResult, TaskStatus
from .state import RunState
from .tools import ArgumentsError, Tool, ToolContext, Toolset, as_tool, render_result, tool

__all__ = [
    "AgentLoop",
    "ArgumentsError",
    "Extension",
    "ModelLike",
    "Reservation",
    "RunResult",
    "RunState",
    "Status",
    "TaskResult",
    "TaskStatus",
    "TokenBudget",
    "Tool",
    "ToolContext",
    "Toolset",
    "as_tool",
    "render_result",
    "tool",
]
