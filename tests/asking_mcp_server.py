"""An MCP server whose tools ask the client for input (elicitation), built with the SDK.

    python tests/asking_mcp_server.py stdio            # the 2026-07-28 protocol and earlier
    python tests/asking_mcp_server.py stdio legacy     # handshake-era only (2025-11-25)

Its questions are the SDK's own (`Resolve(...)` resolvers returning `Elicit`): at 2026-07-28
the call's result is `input_required` and the client sends it again with the answer; on a
handshake-era connection the server sends `elicitation/create` in the middle of the call.
Each tool says in its result what it was answered, declines and cancels included.
"""

from __future__ import annotations

import sys
from typing import Annotated

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel

server = MCPServer("asking")


class Name(BaseModel):
    name: str


class City(BaseModel):
    city: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def ask_city(who: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> Elicit[City]:
    name = who.data.name if isinstance(who, AcceptedElicitation) else "stranger"
    return Elicit(f"Where to, {name}?", City)


def ask_home() -> Elicit[City]:
    return Elicit("Which city do you live in?", City)


def said(outcome: ElicitationResult[Name] | ElicitationResult[City]) -> str:
    if isinstance(outcome, AcceptedElicitation):
        return next(iter(outcome.data.model_dump().values()))
    return f"({outcome.action}d)" if outcome.action == "decline" else f"({outcome.action}led)"


@server.tool()
def greet(who: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
    """Greet the user, asking their name."""
    return f"hello {said(who)}"


@server.tool()
def visit(
    who: Annotated[ElicitationResult[Name], Resolve(ask_name)],
    where: Annotated[ElicitationResult[City], Resolve(ask_city)],
) -> str:
    """Plan a visit: the user's name, then where they go (two questions, one after the other)."""
    return f"{said(who)} goes to {said(where)}"


@server.tool()
def introduce(
    who: Annotated[ElicitationResult[Name], Resolve(ask_name)],
    home: Annotated[ElicitationResult[City], Resolve(ask_home)],
) -> str:
    """Introduce the user: their name and their city (two questions asked at once)."""
    return f"{said(who)} from {said(home)}"


@server.tool()
def echo(text: str) -> str:
    """Say the text back (asks nothing)."""
    return f"echo: {text}"


async def serve_handshake_era() -> None:
    """Serve as a server from before 2026 does: `server/discover` is refused, and the
    client falls back to the `initialize` handshake."""
    from mcp.server.runner import _serve_legacy_stream
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        await _serve_legacy_stream(
            lowlevel,
            read,
            write,
            lifespan_state=state,
            session_id=None,
            init_options=lowlevel.create_initialization_options(),
            raise_exceptions=False,
        )


if __name__ == "__main__":
    if "legacy" in sys.argv[2:]:
        import anyio

        anyio.run(serve_handshake_era)
    else:
        server.run("stdio")
