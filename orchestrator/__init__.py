"""A skills-based multi-agent orchestrator with progressive disclosure.

The public names below are imported when first used (PEP 562), not when the package is:
`orchestrator --version` and `--help` then start without loading the library behind them.
`from orchestrator import Orchestrator` works as ever.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent import (
        CancelHandle,
        RunCancelled,
        RunResult,
        RunSettings,
        TaskResult,
        TokenBudget,
        Tool,
        ToolContext,
        Toolset,
        tool,
    )
    from .errors import (
        ConfigError,
        ModelError,
        NoOutput,
        OrchestratorError,
        PermissionDenied,
        ToolError,
        ToolInfrastructureError,
    )
    from .jobs import JobCancelled, JobResult, load_job
    from .messages import Message, ToolCall, ToolSpec, Usage
    from .models import AgentInfo, FunctionModel
    from .planner import Orchestrator, RunRecipe, run_job, run_job_sync
    from .security import Permissions
    from .skills import Agent, SkillCatalog
    from .tokens import TokenCounter
    from .trace import Trace, read_trace, rebuild_conversations

_EXPORTS: dict[str, str] = {
    "Agent": "skills",
    "AgentInfo": "models",
    "CancelHandle": "agent",
    "ConfigError": "errors",
    "FunctionModel": "models",
    "JobCancelled": "jobs",
    "JobResult": "jobs",
    "load_job": "jobs",
    "Message": "messages",
    "ModelError": "errors",
    "NoOutput": "errors",
    "Orchestrator": "planner",
    "RunRecipe": "planner",
    "run_job": "planner",
    "run_job_sync": "planner",
    "OrchestratorError": "errors",
    "PermissionDenied": "errors",
    "Permissions": "security",
    "read_trace": "trace",
    "rebuild_conversations": "trace",
    "RunCancelled": "agent",
    "RunResult": "agent",
    "RunSettings": "agent",
    "SkillCatalog": "skills",
    "TaskResult": "agent",
    "TokenBudget": "agent",
    "TokenCounter": "tokens",
    "Tool": "agent",
    "tool": "agent",
    "ToolCall": "messages",
    "ToolContext": "agent",
    "ToolError": "errors",
    "ToolInfrastructureError": "errors",
    "Toolset": "agent",
    "ToolSpec": "messages",
    "Trace": "trace",
    "Usage": "messages",
}
__all__ = [
    "Agent",
    "AgentInfo",
    "CancelHandle",
    "ConfigError",
    "FunctionModel",
    "JobCancelled",
    "JobResult",
    "Message",
    "ModelError",
    "NoOutput",
    "Orchestrator",
    "OrchestratorError",
    "Permissions",
    "PermissionDenied",
    "RunCancelled",
    "RunRecipe",
    "RunResult",
    "RunSettings",
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
    "run_job",
    "run_job_sync",
    "rebuild_conversations",
    "tool",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
