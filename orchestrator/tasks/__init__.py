"""Sub-agents as a DAG: the task graph (validated and run), executors, `fork`, and
definitions."""

from ..messages import suggest
from .executor import RemoteForks, RemoteSession, TaskExecutor, TaskOrigin, TaskRequest, TaskSpec
from .fork import ForkExtension, ForkSettings, StepOutput
from .scheduler import (
    GraphError,
    GraphProblem,
    GraphRun,
    LocalExecutor,
    budget_refusal,
    build_graph,
    run_agent_task,
    task_graph,
)
from .subagents import (
    GENERAL,
    GENERAL_AGENT,
    RemoteAgent,
    SubagentDef,
    SubagentError,
    SubagentProblem,
    SubagentRegistry,
    builtin_subagent_folders,
    check_subagent_folder,
)

__all__ = [
    "GENERAL",
    "GENERAL_AGENT",
    "TaskExecutor",
    "ForkExtension",
    "ForkSettings",
    "StepOutput",
    "GraphError",
    "GraphProblem",
    "GraphRun",
    "LocalExecutor",
    "RemoteForks",
    "RemoteSession",
    "RemoteAgent",
    "SubagentDef",
    "SubagentError",
    "SubagentProblem",
    "SubagentRegistry",
    "TaskOrigin",
    "TaskRequest",
    "TaskSpec",
    "budget_refusal",
    "build_graph",
    "check_subagent_folder",
    "builtin_subagent_folders",
    "run_agent_task",
    "suggest",
    "task_graph",
]
