"""MCP servers as a skill's tools, through the official `mcp` SDK (the `[mcp]` extra).

An optional part of the package: it imports the core, and the core finds `joined` through the
package's entry points (`orchestrator.tool_sources`) when a run first loads a skill that
declares servers (`skills/servers.py`, `with_servers`).
What the core keeps is what needs no SDK: the servers' configuration and a run's pool.
`connection` is one server; `tool` adapts its tools; `elicitation` puts what a server asks
during a call to a person; `results` and `schema` convert what crosses the wire;
`skill_servers` joins them to a loaded skill. Only `sdk` imports the SDK, and
only when a server starts.
"""

from .sdk import INSTALL_HINT, McpUnavailable
from .skill_servers import joined

__all__ = ["INSTALL_HINT", "McpUnavailable", "joined"]
