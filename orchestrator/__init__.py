"""A skills-based multi-agent orchestrator with progressive disclosure."""

from .budget import TokenBudget, TokenCounter
from .errors import (
    ConfigError,
    ModelError,
    OrchestratorError,
    PermissionDenied,
    ToolError,
    ToolInfrastructureError,
)
from .jobs import JobResult, load_job
from .loop import Agent
from .messages import Message, ToolCall, ToolSpec, Usage
from .permissions import Permissions
from .planner import Orchestrator
from .results import RunResult, TaskResult
from .skills import SkillCatalog
from .tools import Tool, ToolContext, Toolset, tool
from .trace import Trace, read_trace, rebuild_conversations

__all__ = [
    "Agent",
    "ConfigError",
    "JobResult",
    "Message",
    "ModelError",
    "Orchestrator",
    "OrchestratorError",
    "Permissions",
    "PermissionDenied",
    "RunResult",
    "SkillCatalog",
    "TaskResult",
    "TokenBudget",
    "TokenCounter",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolInfrastructureError",
    "ToolSpec",
    "Toolset",
    "Trace",
    "Usage",
    "load_job",
    "read_trace",
    "rebuild_conversations",
    "tool",
]
