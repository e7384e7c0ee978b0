"""A skills-based multi-agent orchestrator with progressive disclosure."""

from .agent import RunResult, TaskResult, TokenBudget, Tool, ToolContext, Toolset, tool
from .errors import (
    ConfigError,
    ModelError,
    OrchestratorError,
    PermissionDenied,
    ToolError,
    ToolInfrastructureError,
)
from .jobs import JobResult, load_job
from .messages import Message, ToolCall, ToolSpec, Usage
from .planner import Orchestrator
from .security import Permissions
from .skills import Agent, SkillCatalog
from .tokens import TokenCounter
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
