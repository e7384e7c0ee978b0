"""Headless Chromium for tests, driven over the DevTools protocol on a pipe.

`--remote-debugging-pipe` speaks the protocol over file descriptors 3 and 4 (JSON messages
ended by a NUL byte): no port, no websocket package, no browser download. The Chromium is the
system's (Debian's `chromium` package; `.ci/run` installs it).

    with Chromium.launch() as browser:
        page = browser.open(Path("report.html"))
        page.evaluate("document.title")
        page.screenshot(path)
        page.problems()   # console errors, uncaught exceptions, requests that left the file
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")
LOUD = ("error", "warning")


def find_chromium() -> str | None:
    """The browser to use: $CHROMIUM, else the first of CANDIDATES on the PATH."""
    named = os.environ.get("CHROMIUM")
    if named:
        return named
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


class ProtocolError(RuntimeError):
    pass


class Chromium:
    """One headless browser process and its protocol pipe."""

    def __init__(self, process: subprocess.Popen[bytes], send: int, receive: int, profile: str):
        self.process = process
        self._send, self._receive = send, receive
        self._profile = profile
        self._buffer = b""
        self._ids = 0
        self.events: list[dict[str, Any]] = []

    @classmethod
    def launch(cls, executable: str | None = None) -> Chromium:
        executable = executable or find_chromium()
        if executable is None:
            raise FileNotFoundError("no Chromium found")
        to_browser, from_browser = os.pipe(), os.pipe()
        profile = tempfile.mkdtemp(prefix="report-chromium-")

        def plumb() -> None:  # in the child: the pipe's ends become fds 3 and 4
            reads, writes = os.dup(to_browser[0]), os.dup(from_browser[1])
            os.dup2(reads, 3)
            os.dup2(writes, 4)

        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe"]
        flags += [f"--user-data-dir={profile}", "--no-first-run", "--no-default-browser-check"]
        flags += ["--disable-extensions", "--disable-background-networking", "--mute-audio"]
        process = subprocess.Popen(
            [executable, *flags, "about:blank"],
            preexec_fn=plumb,
            close_fds=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser[0])
        os.close(from_browser[1])
        return cls(process, to_browser[1], from_browser[0], profile)

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None
    ) -> dict[str, Any]:
        """Send one command and wait for its answer (events meanwhile go to `events`)."""
        self._ids += 1
        message: dict[str, Any] = {"id": self._ids, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._send, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.receive(timeout=30)
            if reply.get("id") == self._ids:
                if "error" in reply:
                    raise ProtocolError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def receive(self, *, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._receive], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._receive, 1 << 20)
            if not chunk:
                raise ProtocolError("Chromium closed the pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def wait_for(self, method: str, session: str, *, timeout: float = 30) -> dict[str, Any]:
        """The first event `method` of `session`, already received or still to come."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method and event.get("sessionId") == session:
                    self.events.remove(event)
                    return event
            self.events.append(self.receive(timeout=max(0.01, deadline - time.monotonic())))

    def open(self, path: Path, *, width: int = 1440, height: int = 1000) -> Page:
        """A new tab showing the file at `path`, once it has loaded."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        page = Page(self, session["sessionId"], path.resolve().as_uri())
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(f"{domain}.enable")
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        page.call("Emulation.setDeviceMetricsOverride", metrics)
        began = time.perf_counter()
        page.call("Page.navigate", {"url": page.url})
        self.wait_for("Page.loadEventFired", page.session)
        page.load_seconds = time.perf_counter() - began
        return page

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (ProtocolError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        for fd in (self._send, self._receive):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    """One tab: evaluate script, take screenshots, list what went wrong in it."""

    def __init__(self, browser: Chromium, session: str, url: str) -> None:
        self.browser, self.session, self.url = browser, session, url
        self.load_seconds = 0.0

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.call(method, params, session=self.session)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serializable values)."""
        found = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in found:
            raise ProtocolError(f"{expression}: {found['exceptionDetails']}")
        return found["result"].get("value")

    def screenshot(self, path: Path, *, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params["captureBeyondViewport"] = True
            params["clip"] = {"x": 0, "y": 0, "scale": 1, **_clip(size)}
        data = self.call("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, and any request for another URL."""
        self.evaluate("0")  # let pending events arrive before reading them
        found = []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in LOUD:
                found.append(f"console {params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") in (
                "error",
                "warning",
            ):
                found.append(f"log: {params['entry'].get('text')}")
            elif method == "Network.requestWillBeSent" and params["request"]["url"] != self.url:
                found.append(f"request: {params['request']['url']}")
        return found


def _clip(size: dict[str, float]) -> dict[str, float]:
    return {"width": min(size["width"], 1440), "height": min(size["height"], 16000)}
