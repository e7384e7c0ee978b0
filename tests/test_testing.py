"""The loopback guard every test runs under."""

from __future__ import annotations

import socket

import pytest

from orchestrator.testing import NetworkBlocked, is_loopback


def test_loopback_addresses_are_recognised() -> None:
    assert all(is_loopback(a) for a in [("127.0.0.1", 80), ("::1", 80, 0, 0), ("localhost", 1)])
    assert is_loopback("/tmp/some.sock")
    assert not any(is_loopback(a) for a in [("example.invalid", 443), ("10.1.2.3", 80)])


def test_an_outside_connection_is_refused_before_it_is_tried() -> None:
    with socket.socket() as sock, pytest.raises(NetworkBlocked, match="loopback only"):
        sock.connect(("example.invalid", 443))  # refused by the guard: no lookup, no packet


def test_loopback_connections_still_work() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.socket() as client:
            client.connect(server.getsockname())
