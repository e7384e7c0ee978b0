"""The official `mcp` SDK, imported only when a server is actually needed.

`import orchestrator` never imports it, nor does a catalog scan or `skills check`: only
starting (or connecting to) a server does. Without the `[mcp]` extra, `McpUnavailable` says
how to install it, and a skill that declares servers still loads its other parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ToolInfrastructureError

INSTALL_HINT = "pip install 'orchestrator[mcp]'"


class McpUnavailable(ToolInfrastructureError):
    """The `mcp` SDK cannot be imported."""


@dataclass(frozen=True)
class Sdk:
    """The parts of the SDK this package uses."""

    Client: Any
    StdioServerParameters: Any
    stdio_client: Any
    streamable_http_client: Any
    create_http_client: Any
    MCPError: Any
    CONNECTION_CLOSED: int
    ElicitRequest: Any
    ElicitResult: Any
    InputRequiredResult: Any
    HEADER_MISMATCH: int


def load_sdk() -> Sdk:
    """The SDK's client parts; McpUnavailable (with the install command) without it."""
    try:
        from mcp import Client, MCPError, StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client
        from mcp_types import HEADER_MISMATCH, ElicitRequest, ElicitResult, InputRequiredResult
    except ImportError as exc:
        raise McpUnavailable(
            f"MCP servers need the official MCP SDK, which is not installed ({exc}); "
            f"install it with: {INSTALL_HINT}"
        ) from None
    try:
        from mcp_types.jsonrpc import CONNECTION_CLOSED
    except ImportError:  # the SDK's own copy of the constant
        CONNECTION_CLOSED = -32000
    return Sdk(
        Client=Client,
        StdioServerParameters=StdioServerParameters,
        stdio_client=stdio_client,
        streamable_http_client=streamable_http_client,
        create_http_client=create_mcp_http_client,
        MCPError=MCPError,
        CONNECTION_CLOSED=CONNECTION_CLOSED,
        ElicitRequest=ElicitRequest,
        ElicitResult=ElicitResult,
        InputRequiredResult=InputRequiredResult,
        HEADER_MISMATCH=HEADER_MISMATCH,
    )
