"""One MCP server of one run: started on first need, shared by every caller, restarted once.

The SDK's client (and its transport's task group) lives in one task, `_hold`, from entering
to leaving, as anyio wants; callers send requests through it concurrently. A call that finds
the server gone, or that gets no answer within the server's `timeout`, fails as an
infrastructure error, and the server is stopped; the next call starts it again, once per run.
A server that fails after that restart stays down for the rest of the run.

Messages name the server and its program or URL, never its env, headers or arguments, and
what the server wrote on stderr is shown with those values masked.

A call's questions (elicitation, elicitation.py) are answered here, in the way of the
negotiated protocol: a 2026-07-28 server's `input_required` result is answered by sending
the call again with the answers and its `requestState` (at most `MAX_INPUT_ROUNDS` times);
a handshake-era server's `elicitation/create`, which comes in the middle of a call, goes to
the call running on that server (`_elicited`).

A stdio server runs in a process group of its own (the SDK starts it in a new session). The
SDK ends that group only when the server does not exit after its stdin is closed; a server
that exits politely can leave children behind. So on POSIX the server is started through a
two-line launcher that writes down its pid (the group's id) and then `exec`s the server, and
once the server is stopped whatever is left of its group is ended too. A server whose
shutdown outlasts `STOP_GRACE` (a loaded machine, one deaf to its closed stdin) has its group
ended then, rather than the SDK's shutdown cut short by a second cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ..agent import InputRefused, WaitingForInput
from ..errors import ToolError, ToolInfrastructureError
from ..security.inventory import reads_no_configuration
from ..security.sandbox import Launch, server_sandbox
from ..security.secrets import SecretMask
from ..skills.process import end_process_group
from ..skills.servers import secret_values
from ..skills.skill import ServerConfig
from .elicitation import CallQuestions
from .sdk import Sdk, load_sdk

MAX_RESTARTS = 1
STOP_GRACE = 8.0
STDERR_TAIL = 600
MAX_LIST_PAGES = 50
GROUP_GRACE = 1.0
MAX_INPUT_ROUNDS = 10
"""How many times one call is sent again with answers before it is given up."""
STATE_ONLY_PAUSE = 0.05
"""Seconds before sending again a call whose `input_required` result asks nothing (only
its state), doubled each time up to five times this, as the SDK's own client does."""
# Runs as `python -I -S -c LAUNCHER PIDFILE COMMAND ARGS...`: the pid it writes is the one the
# server keeps after exec, and the id of its process group.
LAUNCHER = (
    "import os, sys\n"
    "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "try:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "except OSError as exc:\n"
    "    sys.exit(f'cannot start {sys.argv[2]}: {exc.strerror}')\n"
)


class Connection:
    """A server's client, its tools listing, and whether it may be started again."""

    def __init__(self, name: str, config: ServerConfig, secrets: Sequence[str] = ()) -> None:
        self.name = name
        self.config = config
        self.mask = SecretMask([*secrets, *secret_values(config)])
        self.tools: list[Mapping[str, Any]] = []
        self.instructions: str | None = None
        self.protocol: str | None = None
        """The protocol version negotiated (a 2026 `server/discover` era one, or older)."""
        self.starts = 0
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._stopping: set[asyncio.Task[None]] = set()
        self._pid_files: dict[asyncio.Task[None], Path] = {}
        """Where each stdio server's launcher writes its process group, by holding task."""
        self._lock: asyncio.Lock | None = None
        self._stderr: IO[str] | None = None
        self._tail = ""
        self._sdk: Sdk | None = None
        self._asking: list[CallQuestions] = []
        """The calls running on the server, for the questions a handshake-era one asks."""

    @property
    def up(self) -> bool:
        return self._client is not None and self._task is not None and not self._task.done()

    async def ensure(self) -> Any:
        """The live client, starting the server if it is not running (and may be started)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.up:
                return self._client
            if self.starts > MAX_RESTARTS:
                raise ToolInfrastructureError(
                    f"MCP server {self.name!r} stopped again after a restart; it is not "
                    "started a third time in this run"
                )
            await self._start()
            return self._client

    async def _start(self) -> None:
        await self.stop()
        self._sdk = self._sdk or load_sdk()
        self.starts += 1
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._hold(ready, self._stop))
        try:
            async with asyncio.timeout(self.config.start_timeout):
                self._client = await asyncio.shield(ready)
        except TimeoutError:
            await self.stop()
            raise self._failure(f"did not start within {self.config.start_timeout:g} s") from None
        except Exception as exc:
            await self.stop()
            raise self._failure(f"could not start: {self._reason(exc)}") from None

    async def _hold(self, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        # What a stdio server writes on stderr goes to a file of its own (not our terminal),
        # read back for the messages of its failures.
        with (
            tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as log,
            tempfile.TemporaryDirectory(prefix="orchestrator-mcp-") as folder,
        ):
            self._stderr = log
            pid_file = Path(folder) / "pid"
            holder = asyncio.current_task()
            if holder is not None:
                self._pid_files[holder] = pid_file
            try:
                async with contextlib.AsyncExitStack() as stack:
                    launch = await self._confined(stack)
                    client = await stack.enter_async_context(
                        self._client_for(stack, log, pid_file, launch)
                    )
                    self.tools = await _list_tools(client)
                    self.instructions = getattr(client, "instructions", None)
                    self.protocol = getattr(client, "protocol_version", None)
                    ready.set_result(client)
                    await stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
                if not isinstance(exc, Exception):
                    raise
            finally:
                self._tail = self._stderr_tail()
                self._stderr = None
                try:
                    group = _group_in(pid_file)
                    if group is not None:
                        await end_process_group(group, GROUP_GRACE)
                finally:
                    if holder is not None:
                        self._pid_files.pop(holder, None)

    async def _confined(self, stack: contextlib.AsyncExitStack) -> Launch | None:
        """How a stdio server whose entry has `sandbox:` starts in it (held open with
        `stack`), None for a server that runs as the user."""
        config = self.config
        if config.kind != "stdio" or config.sandbox is None or not config.command:
            return None
        folder = Path(config.cwd or ".")
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="orchestrator-mcp-"))
        sandbox = server_sandbox(config.sandbox, folder, Path(scratch))
        argv = [config.command, *config.args]
        return await stack.enter_async_context(sandbox.launch(argv, cwd=folder, env=config.env))

    def _client_for(
        self, stack: contextlib.AsyncExitStack, log: IO[str], pid_file: Path, launch: Launch | None
    ) -> Any:
        sdk, config = self._sdk, self.config
        assert sdk is not None
        if config.kind == "http":
            http = sdk.create_http_client(headers=dict(config.headers))
            stack.push_async_exit(http)
            transport = sdk.streamable_http_client(config.url, http_client=http)
        elif launch is not None:
            # Its PID namespace ends with it: the launcher's pid would name nothing out here.
            params = sdk.StdioServerParameters(
                command=launch.argv[0], args=launch.argv[1:], env=launch.env, cwd=config.cwd
            )
            transport = sdk.stdio_client(params, errlog=log)
        else:
            command, args = config.command, list(config.args)
            if hasattr(os, "killpg") and command:
                command, args = (
                    sys.executable,
                    ["-I", "-S", "-c", LAUNCHER, str(pid_file), *[command, *args]],
                )
            params = sdk.StdioServerParameters(
                command=command, args=args, env=config.env, cwd=config.cwd
            )
            transport = sdk.stdio_client(params, errlog=log)
        return sdk.Client(transport, mode="auto", cache=None, elicitation_callback=self._elicited)

    async def call(self, tool: str, arguments: Mapping[str, Any], questions: CallQuestions) -> Any:
        """`tools/call`, its questions answered through `questions`; ToolError for the
        server's protocol errors, ToolInfrastructureError when the server is gone or does not
        answer in time (it is then stopped); WaitingForInput (InputRefused) when a question
        must wait for a person (and the run's `on_input` is `fail`)."""
        client = await self.ensure()
        task, sdk = self._task, self._sdk
        assert sdk is not None
        try:
            async with asyncio.timeout(self.config.timeout):
                return await self._answered(client, tool, dict(arguments), questions)
        except (WaitingForInput, InputRefused, ToolError):
            raise
        except TimeoutError:
            failure = self._failure(f"did not answer within {self.config.timeout:g} s")
        except sdk.MCPError as exc:
            if exc.code != sdk.CONNECTION_CLOSED:
                raise ToolError(self.mask(f"MCP error {exc.code}: {exc.message}")) from None
            failure = self._failure(f"closed the connection: {self._reason(exc)}")
        except Exception as exc:
            failure = self._failure(f"failed: {self._reason(exc)}")
        self._drop(task)
        raise failure

    async def _answered(
        self, client: Any, tool: str, arguments: dict[str, Any], questions: CallQuestions
    ) -> Any:
        """The call's result, sent again with the answers while it is `input_required`."""
        sdk = self._sdk
        assert sdk is not None
        responses: dict[str, Any] | None = None
        state: str | None = None
        self._asking.append(questions)
        try:
            for leg in range(MAX_INPUT_ROUNDS + 1):
                result = await self._send(client, tool, arguments, responses, state)
                if not isinstance(result, sdk.InputRequiredResult):
                    questions.settle()  # a handshake-era server's question that waits
                    return result
                if not result.input_requests:  # only its state: "ask again shortly"
                    await asyncio.sleep(min(STATE_ONLY_PAUSE * 2**leg, 5 * STATE_ONLY_PAUSE))
                replies = {}
                for key, request in (result.input_requests or {}).items():
                    if not isinstance(request, sdk.ElicitRequest):
                        raise ToolError(
                            f"MCP server {self.name!r} asked for {request.method} during the "
                            "call, which this client does not answer"
                        )
                    reply = await questions.reply(_wire(request.params))
                    replies[key] = sdk.ElicitResult.model_validate(reply)
                questions.settle()  # it holds nothing meanwhile: the call stops here
                responses, state = replies or None, result.request_state
        finally:
            self._asking.remove(questions)
        raise ToolError(
            f"MCP server {self.name!r} asked for input more than {MAX_INPUT_ROUNDS} times in "
            "one call; the call was given up"
        )

    async def _send(
        self,
        client: Any,
        tool: str,
        arguments: dict[str, Any],
        responses: dict[str, Any] | None,
        state: str | None,
    ) -> Any:
        """One `tools/call`. A 2026-07-28 server that finds the tool's listing stale
        (`HEADER_MISMATCH`) gets it listed again and the call once more, as the spec says."""
        sdk = self._sdk
        assert sdk is not None

        async def send() -> Any:
            return await client.session.call_tool(
                tool,
                arguments,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )

        try:
            return await send()
        except sdk.MCPError as exc:
            if exc.code != sdk.HEADER_MISMATCH:
                raise
        await _list_tools(client)
        return await send()

    async def _elicited(self, context: Any, params: Any) -> Any:
        """A handshake-era server's `elicitation/create`, in the middle of a call: answered
        for the one call running on the server; cancelled when none or several are."""
        sdk = self._sdk
        assert sdk is not None
        wire = _wire(params)
        running = list(self._asking)
        if len(running) == 1:
            return sdk.ElicitResult.model_validate(await running[0].reply_in_call(wire))
        for questions in running:
            questions.unplaced(wire, len(running))
        if not running:
            logging.getLogger(__name__).warning(
                "MCP server %r asked a question while no call of ours ran; it was cancelled",
                self.name,
            )
        return sdk.ElicitResult(action="cancel")

    def _drop(self, task: asyncio.Task[None] | None) -> None:
        """Stop the server a call failed on, in the background (the call's result does not
        wait for it), unless another call has already started a new one."""
        if task is None or task is not self._task:
            return
        starting = self._client is None  # still in its handshake: nothing to finish
        self._task, self._client = None, None
        if self._stop is not None:
            self._stop.set()
        if starting:
            task.cancel()  # the SDK's transport still ends the process (bounded)
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def stop(self) -> None:
        """Stop the server (stdio: close its stdin, then end its process group), and wait
        for servers dropped earlier to be gone."""
        self._drop(self._task)
        waiting = list(self._stopping)
        if not waiting:
            return
        _, pending = await asyncio.wait(waiting, timeout=STOP_GRACE)
        # Still on its way out (a loaded machine, a server deaf to its closed stdin): end its
        # process group here and let the SDK's shutdown see it gone. Cancelling the task
        # instead cuts that shutdown short before it kills the server, whose stdout the
        # SDK's reader then drains forever: the server would outlive the run.
        groups = [_group_in(self._pid_files[t]) for t in pending if t in self._pid_files]
        await asyncio.gather(*(end_process_group(g, GROUP_GRACE) for g in groups if g))
        if pending:
            _, pending = await asyncio.wait(pending, timeout=STOP_GRACE)
        # Still there (an HTTP server's client, or no process group to end): cancel it.
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=STOP_GRACE)

    def _failure(self, what: str) -> ToolInfrastructureError:
        where = self.config.where()
        text = f"MCP server {self.name!r} ({where}) {what}"
        tail = self._stderr_tail()
        if tail:
            text += f"; its last stderr output: {tail}"
        return ToolInfrastructureError(self.mask(text))

    def _reason(self, exc: BaseException) -> str:
        if isinstance(exc, BaseExceptionGroup):
            return "; ".join(self._reason(e) for e in exc.exceptions)
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

    def _stderr_tail(self) -> str:
        handle = self._stderr
        if handle is None or handle.closed:
            return self._tail
        try:
            handle.flush()
            handle.seek(0)
            text = handle.read()
        except (OSError, ValueError):
            return ""
        return " ".join(text[-STDERR_TAIL:].split())


@reads_no_configuration(
    "the process group a stdio MCP server's launcher wrote, in a private temporary folder "
    "of the run's own"
)
def _group_in(pid_file: Path) -> int | None:
    """The process group of a stdio server the launcher started (its pid), if it did."""
    try:
        return int(pid_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # an HTTP server, or the launcher never ran


def _wire(params: Any) -> dict[str, Any]:
    """An SDK request's params as on the wire (camelCase)."""
    dumped: dict[str, Any] = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


async def _list_tools(client: Any) -> list[Mapping[str, Any]]:
    """Every page of `tools/list`, each tool as a wire-shaped mapping."""
    found: list[Mapping[str, Any]] = []
    cursor = None
    for _ in range(MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        found += [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools]
        cursor = getattr(page, "next_cursor", None) or getattr(page, "nextCursor", None)
        if not cursor:
            break
    return found
