"""Keeping test and benchmark processes off the network.

`loopback_only()` refuses every outgoing connection that is not to 127.0.0.1, ::1, localhost
or a Unix socket, so a test that would reach a real provider fails loudly instead.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

# What `socket.connect` takes, as the standard library's stubs spell it: a (host, port, ...)
# tuple, a Unix socket path, or the bytes of an abstract socket name.
_Address: TypeAlias = "tuple[Any, ...] | str | ReadableBuffer"


class NetworkBlocked(ConnectionRefusedError):
    """A guarded process tried to reach past the loopback interface."""


def is_loopback(address: object) -> bool:
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

    def guarded(self: socket.socket, address: _Address) -> None:
        if not is_loopback(address):
            raise NetworkBlocked(f"{who} may not connect to {address!r}: loopback only")
        connect(self, address)

    def guarded_ex(self: socket.socket, address: _Address) -> int:
        if not is_loopback(address):
            raise NetworkBlocked(f"{who} may not connect to {address!r}: loopback only")
        return connect_ex(self, address)

    _patch(guarded, guarded_ex)
    return lambda: _patch(connect, connect_ex)


def _patch(
    connect: Callable[[socket.socket, _Address], None],
    connect_ex: Callable[[socket.socket, _Address], int],
) -> None:
    # Replacing the methods on the class is the point: every socket, whoever opens it, is
    # guarded. (The stubs declare both on `_socket.socket`, hence `assignment` as well.)
    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]


@contextmanager
def loopback_only(who: str = "tests") -> Iterator[None]:
    """Within the block, only loopback connections are allowed."""
    lift = block_outside_connections(who)
    try:
        yield
    finally:
        lift()
