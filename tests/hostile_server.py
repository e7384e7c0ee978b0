"""A hostile HTTP server on 127.0.0.1 for deadline and size tests.

Routes:
- `/trickle`: a 200 whose body arrives one byte every `TRICKLE_GAP` seconds, for ever;
- `/sse-forever`: a 200 server-sent event stream of keep-alive comments that never ends;
- `/huge/N/...`: a 200 body of N megabytes of text, sent as fast as the socket takes it;
- `.../chat/completions`: the endless event stream, for model adapters;
- POST on any route answers as GET does (model adapters POST).

Every reply loop is bounded (it stops when the client goes away or after `MAX_SECONDS`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

TRICKLE_GAP = 0.3
MAX_SECONDS = 60.0
CHUNK = b"a" * 65_536


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.do_GET()

    def do_GET(self) -> None:
        parts = urlparse(self.path).path.split("/")
        try:
            if "huge" in parts:
                self._huge(int(parts[parts.index("huge") + 1]))
            elif "trickle" in parts:
                self._forever("text/plain", b"x", TRICKLE_GAP)
            elif parts[-1] in ("sse-forever", "completions"):
                self._forever("text/event-stream", b": keep-alive\n\n", TRICKLE_GAP)
            else:
                self.send_error(404)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up: that is what the tests want

    def _forever(self, kind: str, piece: bytes, gap: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        ends = time.monotonic() + MAX_SECONDS
        while time.monotonic() < ends:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            time.sleep(gap)

    def _huge(self, megabytes: int) -> None:
        size = megabytes * 1_000_000
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        sent = 0
        while sent < size:
            piece = CHUNK[: size - sent]
            self.wfile.write(piece)
            sent += len(piece)


@contextmanager
def hostile_server() -> Iterator[str]:
    """The server's base URL, `http://127.0.0.1:PORT`, while the block runs."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
