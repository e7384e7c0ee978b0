"""Shared test setup: nothing may reach past the loopback interface."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from orchestrator.models import close_connections

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = address[0]
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return isinstance(address, str | bytes)  # a Unix socket path stays on this machine


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may not connect to {address!r}: loopback only")
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may not connect to {address!r}: loopback only")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refuse every outgoing connection that is not to 127.0.0.1, ::1 or localhost."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    yield


@pytest.fixture(autouse=True)
async def close_model_clients() -> AsyncIterator[None]:
    """Model adapters share one HTTP client per endpoint and event loop: close them after
    each test, whose event loop ends with it."""
    yield
    await close_connections()
