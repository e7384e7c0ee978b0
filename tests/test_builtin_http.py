"""The built-in `http` skill against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from skill_factory import call, context

from orchestrator.agent import Tool, ToolContext
from orchestrator.errors import PermissionDenied, ToolError
from orchestrator.skills import SkillCatalog


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        routes = {
            "/hello": (200, "text/plain; charset=utf-8", b"hello there"),
            "/data": (200, "application/json", json.dumps({"items": [1, 2]}).encode()),
            "/big": (200, "text/plain", b"a" * 30_000),
            "/image": (200, "image/png", b"\x89PNG" + bytes(100)),
            "/missing": (404, "text/plain", b"no such page"),
        }
        if self.path == "/hop":
            self._redirect("/hello")
        elif self.path == "/away":
            self._redirect(f"http://localhost:{port}/hello")
        elif self.path == "/loop":
            self._redirect("/loop")
        else:
            status, kind, body = routes.get(self.path, routes["/missing"])
            self._send(status, kind, body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        echo = {
            "body": body.decode(),
            "type": self.headers.get("Content-Type"),
            "token": self.headers.get("X-Token"),
        }
        self._send(201, "application/json", json.dumps(echo).encode())

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def http() -> dict[str, Tool]:
    return {t.name: t for t in SkillCatalog().load("http").tools}


@pytest.fixture
def allowed(tmp_path: Path) -> ToolContext:
    return context(tmp_path, network=["127.0.0.1"])


async def test_hosts_not_on_the_allow_list_are_denied(
    http: dict[str, Tool], server: str, tmp_path: Path
) -> None:
    with pytest.raises(PermissionDenied, match=r"127\.0\.0\.1:\d+ needs that host"):
        await call(http["http__get"], context(tmp_path), url=f"{server}/hello")
    other_port = context(tmp_path, network=["127.0.0.1:1"])
    with pytest.raises(PermissionDenied):
        await call(http["http__get"], other_port, url=f"{server}/hello")


async def test_get_returns_status_type_and_body(
    http: dict[str, Tool], server: str, allowed: ToolContext
) -> None:
    out = await call(http["http__get"], allowed, url=f"{server}/hello")
    assert out == (
        f"HTTP 200 OK\nURL: {server}/hello\nContent-Type: text/plain; charset=utf-8\n\nhello there"
    )
    out = await call(http["http__get"], allowed, url=f"{server}/missing")
    assert out.startswith("HTTP 404 Not Found") and out.endswith("no such page")


async def test_an_allow_list_entry_with_a_port(
    http: dict[str, Tool], server: str, tmp_path: Path
) -> None:
    port = server.rsplit(":", 1)[1]
    ctx = context(tmp_path, network=[f"127.0.0.1:{port}"])
    assert (await call(http["http__get"], ctx, url=f"{server}/data")).endswith('{"items": [1, 2]}')


async def test_post_sends_json_or_text(
    http: dict[str, Tool], server: str, allowed: ToolContext
) -> None:
    out = await call(
        http["http__post"],
        allowed,
        url=f"{server}/echo",
        json_body={"a": 1},
        headers={"X-Token": "t"},
    )
    assert out.startswith("HTTP 201 Created")
    echo = json.loads(out.split("\n\n", 1)[1])
    assert echo == {"body": '{"a":1}', "type": "application/json", "token": "t"}
    out = await call(http["http__post"], allowed, url=f"{server}/echo", text_body="plain")
    assert json.loads(out.split("\n\n", 1)[1])["body"] == "plain"
    with pytest.raises(ToolError, match="not both"):
        await call(http["http__post"], allowed, url=f"{server}/echo", json_body=1, text_body="x")


async def test_redirects_are_followed_only_to_allowed_hosts(
    http: dict[str, Tool], server: str, allowed: ToolContext
) -> None:
    out = await call(http["http__get"], allowed, url=f"{server}/hop")
    assert out.startswith(f"HTTP 200 OK\nURL: {server}/hello")
    with pytest.raises(PermissionDenied, match="localhost"):
        await call(http["http__get"], allowed, url=f"{server}/away")
    with pytest.raises(ToolError, match="more than 5 redirects"):
        await call(http["http__get"], allowed, url=f"{server}/loop")


async def test_big_and_binary_bodies_are_not_dumped(
    http: dict[str, Tool], server: str, allowed: ToolContext
) -> None:
    big = await call(http["http__get"], allowed, url=f"{server}/big")
    assert big.endswith("[... 10000 more characters of the body left out]")
    image = await call(http["http__get"], allowed, url=f"{server}/image")
    assert image.endswith("[binary body of 104 bytes, not shown]")


async def test_bad_urls_and_dead_servers_are_tool_errors(
    http: dict[str, Tool], tmp_path: Path
) -> None:
    ctx = context(tmp_path, network=["*"])
    with pytest.raises(ToolError, match="absolute http"):
        await call(http["http__get"], ctx, url="ftp://127.0.0.1/file")
    with pytest.raises(ToolError, match="absolute http"):
        await call(http["http__get"], ctx, url="/relative")
    with pytest.raises(ToolError, match="failed: ConnectError"):
        await call(http["http__get"], ctx, url="http://127.0.0.1:9/")
