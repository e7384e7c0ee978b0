"""Running a child process for a skill's tool: a real timeout, a capped output, a clean end.

The child runs in a session of its own, so on a timeout (or when the calling tool is
cancelled) the whole process group is killed, not only the shell in front of it. Output
(stdout and stderr together) is kept up to a cap: its beginning and its end, with a note of
how much was left out between them. The child's environment leaves out variables whose names
look secret (API keys, tokens, passwords), so they do not turn up in a casual `env`; the
child still runs as the same user, so this is hygiene, not a security boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..security import is_secret_name
from ..security.sandbox import Sandbox, git_safety

DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 600.0
DEFAULT_MAX_OUTPUT = 20_000
GROUP_POLL = 0.02
KILLED = (137, -9)
"""Exit codes of a command ended by SIGKILL (through a shell, directly)."""


@dataclass(frozen=True)
class ProcessResult:
    """How a child process ended and what it printed (capped)."""

    exit_code: int | None
    output: str
    timed_out: bool = False
    omitted: int = 0
    sandbox: str | None = None
    """The sandbox it ran in and its limits, None when none confined it."""
    refused: tuple[str, ...] = ()
    """The `host:port` the sandbox's network proxy refused."""

    def render(self, timeout: float) -> str:
        """The text a model reads: the exit status first, then the output."""
        if self.timed_out:
            status = f"timed out after {timeout:g} s; the process was killed"
        else:
            status = f"exit code {self.exit_code}"
        body = self.output if self.output.strip() else "(no output)"
        notes = ""
        if self.refused:
            notes += (
                f"\n[blocked by the sandbox: connections to {', '.join(self.refused)} "
                "(not in sandbox.network)]"
            )
        if self.sandbox is not None and self.exit_code in KILLED:
            notes += (
                f"\n[killed in the sandbox ({self.sandbox}): a process that passes the "
                "memory limit is killed]"
            )
        return f"[{status}]\n{body}{notes}"


class _CappedOutput:
    """Keeps the first and last `limit // 2` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        take = max(0, self.head_limit - len(self.head))
        self.head += chunk[:take]
        self.tail += chunk[take:]
        if len(self.tail) > self.tail_limit:
            del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.omitted:
            return head + tail
        return f"{head}\n[... {self.omitted} bytes of output left out ...]\n{tail}"


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The parent's environment without secret-looking variables, plus `extra`; git in
    it ignores a repository's hooks and fsmonitor, and bare repositories it was not
    pointed at (`git_safety`)."""
    env = {k: v for k, v in os.environ.items() if not is_secret_name(k)}
    env.update(git_safety())
    env.update(extra or {})
    return env


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout_seconds: float = DEFAULT_TIMEOUT,
    max_output: int = DEFAULT_MAX_OUTPUT,
    env: Mapping[str, str] | None = None,
    sandbox: Sandbox | None = None,
    read_only: Sequence[Path] = (),
) -> ProcessResult:
    """Run `argv` in `cwd`, inside `sandbox` when given (`read_only`: more paths it reads
    there); kill its process tree after `timeout_seconds` or on cancellation."""
    env = dict(env) if env is not None else child_environment()
    if sandbox is None:
        return await _run(argv, cwd=cwd, env=env, seconds=timeout_seconds, cap=max_output)
    async with sandbox.launch(argv, cwd=cwd, env=env, read_only=read_only) as launch:
        result = await _run(
            launch.argv,
            cwd=cwd,
            env=launch.env,
            seconds=sandbox.timeout(timeout_seconds),
            cap=max_output,
        )
    confined = None if sandbox.backend == "none" else sandbox.limits()
    return replace(result, sandbox=confined, refused=tuple(dict.fromkeys(launch.refused)))


async def _run(
    argv: Sequence[str], *, cwd: Path, env: dict[str, str], seconds: float, cap: int
) -> ProcessResult:
    timeout_seconds, max_output = seconds, cap
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    output = _CappedOutput(max_output)
    timed_out = False
    try:
        async with asyncio.timeout(timeout_seconds):
            await _drain(process, output)
            await process.wait()
    except TimeoutError:
        timed_out = True
    finally:
        # On a timeout the shell may be gone while its children still hold the output open.
        if timed_out or process.returncode is None:
            _kill_group(process)
            await process.wait()
    return ProcessResult(
        exit_code=None if timed_out else process.returncode,
        output=output.text(),
        timed_out=timed_out,
        omitted=output.omitted,
    )


async def _drain(process: asyncio.subprocess.Process, output: _CappedOutput) -> None:
    stream = process.stdout
    if stream is None:
        return
    while chunk := await stream.read(65_536):
        output.add(chunk)


def _kill_group(process: asyncio.subprocess.Process) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except ProcessLookupError:
        pass


async def end_process_group(group: int, grace: float = 1.0) -> None:
    """End every process left in a process group (a server's grandchildren, say): SIGTERM,
    then SIGKILL for whatever is still there after `grace` seconds. Without process groups
    (Windows) there is nothing to do here."""
    if not hasattr(os, "killpg"):
        return
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return  # the whole group is gone already
    except PermissionError:
        pass  # a member we may not signal; the rest still get SIGKILL below
    try:
        for _ in range(max(1, round(grace / GROUP_POLL))):
            if not _group_alive(group):
                return
            await asyncio.sleep(GROUP_POLL)
    finally:  # cancelled while waiting, or the grace is over: nothing may stay behind
        if _group_alive(group):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clamp_timeout(timeout: float) -> float:
    """A timeout the model asked for, kept between 1 s and MAX_TIMEOUT."""
    return max(1.0, min(float(timeout), MAX_TIMEOUT))
