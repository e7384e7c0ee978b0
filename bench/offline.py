"""Keep benchmark processes off the network: telemetry off, and every outside connection refused.

Peers are driven by fake models, so nothing should ever connect; this makes sure of it (a
framework that tried would fail loudly instead of timing a network round trip).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import Any

QUIET = {
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "OTEL_SDK_DISABLED": "true",
    "LOGFIRE_SEND_TO_LOGFIRE": "false",
}


class NetworkBlocked(ConnectionRefusedError):
    """A benchmark process tried to reach past the loopback interface."""


def _is_local(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # a Unix socket path
    host = address[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def block_network() -> None:
    """Set the peers' telemetry switches off and refuse connections that are not local."""
    for name, value in QUIET.items():
        os.environ.setdefault(name, value)
    connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> None:
        if not _is_local(address):
            raise NetworkBlocked(f"benchmark processes may not connect to {address!r}")
        connect(self, address)

    def guarded_ex(self: socket.socket, address: Any) -> int:
        guarded(self, address)
        return 0

    socket.socket.connect = guarded
    socket.socket.connect_ex = guarded_ex
