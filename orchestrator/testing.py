"""Keeping test and benchmark processes off the network.

`loopback_only()` refuses every outgoing connection that is not to 127.0.0.1, ::1, localhost
or a Unix socket, so a test that would reach a real provider fails loudly instead.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class NetworkBlocked(ConnectionRefusedError):
    """A guarded process tried to reach past the loopback interface."""


def is_loopback(address: Any) -> bool:
    """Whether a socket address stays on this machine."""
    if not isinstance(address, tuple):
        return True  # a Unix socket path
    host = address[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def block_outside_connections(who: str = "this process") -> Callable[[], None]:
    """Refuse non-loopback connections from now on; returns a function that lifts it."""
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guarded(self: socket.socket, address: Any) -> None:
        if not is_loopback(address):
            raise NetworkBlocked(f"{who} may not connect to {address!r}: loopback only")
        connect(self, address)

    def guarded_ex(self: socket.socket, address: Any) -> int:
        if not is_loopback(address):
            raise NetworkBlocked(f"{who} may not connect to {address!r}: loopback only")
        return connect_ex(self, address)

    _patch(guarded, guarded_ex)
    return lambda: _patch(connect, connect_ex)


def _patch(connect: Callable[..., Any], connect_ex: Callable[..., Any]) -> None:
    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex


@contextmanager
def loopback_only(who: str = "tests") -> Iterator[None]:
    """Within the block, only loopback connections are allowed."""
    lift = block_outside_connections(who)
    try:
        yield
    finally:
        lift()
