"""A2A, both ways, through the official `a2a-sdk` (the `[a2a]` extra; docs/a2a.md).

- Serve: `serve(jobs)` (`orchestrator serve JOB.yaml`) makes jobs one A2A agent: its card
  has one skill per job, a message starts a run, the run's steps and sub-agents stream as
  status updates, its output and files come back as the final message and artifacts.
- Consume: a sub-agent definition with `a2a: URL` is a remote agent; the core's fork runs
  its tasks through `run_remote_task`, found through the package's entry points
  (`orchestrator.remote_agents`) only when a definition is remote.
"""

from .client import run_remote_task
from .served import JobAgent
from .server import agent_card, build_app, serve

__all__ = ["JobAgent", "agent_card", "build_app", "run_remote_task", "serve"]
