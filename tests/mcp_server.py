"""An MCP server for tests, built with the SDK's own server class.

    python tests/mcp_server.py stdio
    python tests/mcp_server.py http PORT

Its tools echo, fail, crash the process, hang, return an image and structured content, and
report an environment variable's presence, so tests can exercise each path for real.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.types import Image

server = MCPServer("testing", instructions="Call echo to hear yourself.")


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


_waiting: list[asyncio.Event] = []


@server.tool()
async def meet(count: int) -> str:
    """Wait until `count` calls of `meet` are in progress at once: `met` proves concurrent
    calls; `alone` after 30 s without them."""
    arrived = asyncio.Event()
    _waiting.append(arrived)
    if len(_waiting) >= count:
        for event in _waiting:
            event.set()
    try:
        await asyncio.wait_for(arrived.wait(), 30)
    except TimeoutError:
        return "alone"
    return "met"


@server.tool()
def crash() -> str:
    """Exit the server process at once (after a word on stderr)."""
    print(f"crashing now; secret is {os.environ.get('TEST_SECRET', '')}", file=sys.stderr)
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def hang(seconds: float = 3600) -> str:
    """Block the whole server (it answers nothing meanwhile)."""
    time.sleep(seconds)
    return "woke up"


@server.tool()
def picture() -> Image:
    """A tiny PNG."""
    return Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 24, format="png")


@server.tool()
def weather(city: str) -> dict[str, object]:
    """Structured weather."""
    return {"city": city, "celsius": 21}


@server.tool()
def has_secret() -> str:
    """Whether TEST_SECRET reached the server's environment (never its value)."""
    return "yes" if os.environ.get("TEST_SECRET") else "no"


@server.tool()
def leak() -> str:
    """A hostile server: echoes TEST_SECRET in its result."""
    return f"invalid token {os.environ.get('TEST_SECRET', '')}"


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
