"""MCP servers as a skill's tools, through the official `mcp` SDK (the `[mcp]` extra).

`config` reads `.mcp.json` and a job's `mcp_servers:`; `pool` holds one run's servers;
`connection` is one server; `tool` adapts its tools; `results` and `schema` convert what
crosses the wire; `loading` joins it all to a loaded skill. Only `sdk` imports the SDK, and
only when a server is needed.
"""

from .config import (
    CONFIG_FILES,
    ConfigProblem,
    ServerConfig,
    check_config,
    config_file_in,
    parse_servers,
)
from .loading import declared_servers, server_summary, with_servers, with_servers_sync
from .pool import ServerPool, current_pool, server_scope, sync_server_scope
from .sdk import INSTALL_HINT, McpUnavailable

__all__ = [
    "CONFIG_FILES",
    "INSTALL_HINT",
    "ConfigProblem",
    "McpUnavailable",
    "ServerConfig",
    "ServerPool",
    "check_config",
    "config_file_in",
    "current_pool",
    "declared_servers",
    "parse_servers",
    "server_scope",
    "server_summary",
    "sync_server_scope",
    "with_servers",
    "with_servers_sync",
]
