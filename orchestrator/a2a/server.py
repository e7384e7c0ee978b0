"""`orchestrator serve`: jobs as one A2A agent over HTTP (JSON-RPC), through the SDK's routes.

The agent card at `/.well-known/agent-card.json` is built from the specs: the first job's
name and description (or a joint one), text in and out, and one A2A skill per job. Requests
go to the SDK's request handler (send, stream, get, cancel, subscribe), whose executor is a
`JobAgent`. Two guards stand before it: a body over `max_request_bytes` is refused (413), and
with tokens every request but the card's needs `Authorization: Bearer TOKEN`, one of them
(401). Binding an address other than loopback without a token is refused.

A task belongs to the bearer token that created it (on a server without tokens, to the one a
client chose to send, or to no one): other clients are told it is not found, and `ListTasks`
lists a caller's own tasks, and needs a token. The task store keeps ended tasks for a while
(`keep_tasks`, `keep_seconds`), and nothing of a rejected task's message; a task that waits
for its client's answer is kept until it is answered or cancelled, across restarts of the
server (the executor records it under the trace folder, and the store takes it back, its
owner's, as the server starts).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
    HTTPAuthSecurityScheme,
    ListTasksRequest,
    ListTasksResponse,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_CURRENT
from a2a.utils.errors import InvalidRequestError, TaskNotCancelableError
from starlette.applications import Starlette
from starlette.requests import Request

from ..errors import ConfigError
from ..jobs import Job
from ..planner import Orchestrator
from ..security.inventory import TRACE_FOLDER
from .served import MAX_WAITING, JobAgent, message_input

MAX_REQUEST_BYTES = 1_000_000
KEEP_TASKS = 100
"""Ended tasks the server keeps for `GetTask` (the oldest go first)."""
KEEP_SECONDS = 3600.0
"""How long the server keeps an ended task."""
ENDED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def agent_card(jobs: Sequence[Job], url: str, *, secured: bool = False) -> AgentCard:
    """The card of the agent that serves `jobs` at `url`."""
    skills = [
        AgentSkill(
            id=job.name,
            name=job.name,
            description=_job_description(job),
            tags=["job"],
            input_modes=["text/plain"],
            output_modes=["text/plain", "application/octet-stream"],
        )
        for job in jobs
    ]
    first = jobs[0]
    description = (
        _job_description(first)
        if len(jobs) == 1
        else "Jobs served as one agent; name one with the message metadata field `skill` "
        f"(default: {first.name}). " + " ".join(f"{j.name}: {_job_description(j)}" for j in jobs)
    )
    card = AgentCard(
        name=first.name if len(jobs) == 1 else "orchestrator jobs",
        description=description,
        version="1",
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION_CURRENT
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/octet-stream"],
        skills=skills,
    )
    if secured:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
        )
        card.security_requirements.append(
            SecurityRequirement(schemes={"bearer": StringList(list=[])})
        )
    return card


def _job_description(job: Job) -> str:
    name = message_input(job)
    takes = "the goal" if name is None else f"its input `{name}`"
    return f"Runs the job {job.name!r}; the message's text is {takes}."


class Caller(User):
    """Who sends a request, as the task store scopes tasks: the digest of the bearer token it
    sent, or nobody ("") when it sent none."""

    def __init__(self, owner: str) -> None:
        self.owner = owner

    @property
    def is_authenticated(self) -> bool:
        return bool(self.owner)

    @property
    def user_name(self) -> str:
        return self.owner


class CallerContext(DefaultServerCallContextBuilder):
    """Names each request's caller by its bearer token (checked by the Guard when the
    server has tokens; on a server without, a name the client chose for itself)."""

    def build_user(self, request: Request) -> User:
        return Caller(caller_of(request.headers.get("authorization", "")))


def caller_of(authorization: str) -> str:
    """The owner name of an `Authorization` header: a digest of its bearer token, never the
    token itself (the store's keys may be logged)."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return ""
    return "bearer:" + hashlib.sha256(token.strip().encode()).hexdigest()[:32]


class KeptTasks(TaskStore):
    """The SDK's in-memory store, scoped by caller, that forgets an ended task once
    `keep_tasks` newer ones have ended or `keep_seconds` have passed, and keeps a rejected
    task without the message it refused (a client may send many large ones). `restored`
    (owner, task) are put back before the first request reads or writes it: the tasks an
    earlier server left waiting for an answer."""

    def __init__(
        self, keep_tasks: int, keep_seconds: float, restored: Sequence[tuple[str, Task]] = ()
    ) -> None:
        self.store = InMemoryTaskStore()
        self.keep_tasks = keep_tasks
        self.keep_seconds = keep_seconds
        self.ended: OrderedDict[tuple[str, str], float] = OrderedDict()
        """(owner, task id) of each ended task, the oldest first, with when it ended."""
        self.restoring = list(restored)

    async def _restore(self) -> None:
        while self.restoring:
            owner, task = self.restoring.pop()
            await self.store.save(task, ServerCallContext(user=Caller(owner)))

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self._restore()
        if task.status.state == TaskState.TASK_STATE_REJECTED:
            kept = Task()
            kept.CopyFrom(task)
            kept.ClearField("history")
            task = kept
        await self.store.save(task, context)
        key = (context.user.user_name, task.id)
        if task.status.state in ENDED:
            self.ended[key] = time.monotonic()
            self.ended.move_to_end(key)
        else:
            self.ended.pop(key, None)
        await self._forget()

    async def _forget(self) -> None:
        oldest = time.monotonic() - self.keep_seconds
        while self.ended:
            (owner, task_id), ended_at = next(iter(self.ended.items()))
            if len(self.ended) <= self.keep_tasks and ended_at >= oldest:
                return
            del self.ended[(owner, task_id)]
            await self.store.delete(task_id, ServerCallContext(user=Caller(owner)))

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        await self._restore()
        task: Task | None = await self.store.get(task_id, context)
        return task

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        await self._restore()
        page: ListTasksResponse = await self.store.list(params, context)
        return page

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self._restore()
        self.ended.pop((context.user.user_name, task_id), None)
        await self.store.delete(task_id, context)


class JobRequestHandler(DefaultRequestHandler):
    """The SDK's handler, which also stops a task's run (or forgets that it waits for an
    answer) when it is cancelled while it waits for input (the SDK may call no executor
    then), and lists tasks only to a caller with a bearer token (its own tasks)."""

    def __init__(
        self,
        agent: JobAgent,
        card: AgentCard,
        *,
        keep_tasks: int = KEEP_TASKS,
        keep_seconds: float = KEEP_SECONDS,
    ) -> None:
        store = KeptTasks(keep_tasks, keep_seconds, agent.restored)
        super().__init__(agent_executor=agent, task_store=store, agent_card=card)
        self.agent = agent

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        if not context.user.user_name:
            raise InvalidRequestError(
                "ListTasks needs a bearer token (Authorization: Bearer TOKEN): it lists the "
                "tasks created with that token; a task sent without one is reached by its id"
            )
        page: ListTasksResponse = await super().on_list_tasks(params, context)
        return page

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        # The store answers "not found" to a caller who does not own the task: its run is
        # left alone. A task waiting for input is not cancelable in the SDK's eyes, but its
        # owner's cancel still ends the run.
        try:
            task: Task | None = await super().on_cancel_task(params, context)
        except TaskNotCancelableError:
            await self.agent.stop(params.id)
            raise
        await self.agent.stop(params.id)
        return task


class Guard:
    """Refuses a request body over `max_bytes` (413) and, with tokens, a request without
    `Authorization: Bearer TOKEN` for one of them (401); the card stays public.

    A web page the user has open must not start runs on their keys: a request a browser sends
    for a page carries an `Origin` header, which no A2A client needs, and is refused (403).
    Without a token (loopback only), a `Host` that is not a loopback name is refused too: a
    page whose own name was re-pointed at 127.0.0.1 (DNS rebinding) sends its own name."""

    def __init__(self, app: ASGIApp, *, tokens: Sequence[str], max_bytes: int) -> None:
        self.app = app
        self.expected = [f"Bearer {token}".encode() for token in tokens]
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        public = scope["path"] == AGENT_CARD_WELL_KNOWN_PATH
        if not public and "origin" in headers:
            await _refuse(send, 403, "requests from web pages (with an Origin) are refused")
            return
        if not self.expected and not is_loopback(_host_name(headers.get("host", ""))):
            await _refuse(send, 403, "without a token, only a loopback Host is served")
            return
        if self.expected and not public:
            given = headers.get("authorization", "").encode()
            # Every token compared, so the time taken says nothing of which one came close.
            matches = [hmac.compare_digest(given, expected) for expected in self.expected]
            if not any(matches):
                await _refuse(send, 401, "a bearer token is required")
                return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await _refuse(send, 413, f"request over {self.max_bytes} bytes")
            return
        body = await _read_body(receive, self.max_bytes)
        if body is None:
            await _refuse(send, 413, f"request over {self.max_bytes} bytes")
            return
        await self.app(scope, _replay(body, receive), send)


def _host_name(host: str) -> str:
    """`127.0.0.1` of `127.0.0.1:8000`, `::1` of `[::1]:8000`."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request's whole body, or None once it grows past `limit` (a chunked body has no
    Content-Length to check first)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` that gives the body read already, then what the connection says next (a
    disconnect, which a streamed response waits for)."""
    sent = False

    async def replay() -> MutableMapping[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _refuse(send: Send, status: int, reason: str) -> None:
    body = reason.encode()
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def build_app(
    jobs: Sequence[Job],
    url: str,
    *,
    tokens: Sequence[str] = (),
    max_tasks: int = 4,
    max_waiting: int = MAX_WAITING,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    trace_dir: Path = TRACE_FOLDER,
    user_skills: bool = False,
    keep_tasks: int = KEEP_TASKS,
    keep_seconds: float = KEEP_SECONDS,
) -> tuple[ASGIApp, JobAgent]:
    """The ASGI app that serves `jobs` as one agent whose card names `url`, and its executor.
    `tokens` are the bearer tokens clients may send (one each: a task belongs to its token).
    A job with problems (jobs/preflight.py) is refused here with its `SpecError`."""
    if not jobs:
        raise ConfigError("no job to serve")
    for job in jobs:  # a job that would certainly fail is refused at start, as `run` refuses
        Orchestrator.from_job(job, user_skills=user_skills)
    agent = JobAgent(
        jobs,
        max_tasks=max_tasks,
        max_waiting=max_waiting,
        trace_dir=trace_dir,
        user_skills=user_skills,
    )
    card = agent_card(jobs, url, secured=bool(tokens))
    handler = JobRequestHandler(agent, card, keep_tasks=keep_tasks, keep_seconds=keep_seconds)
    rpc = create_jsonrpc_routes(handler, rpc_url="/", context_builder=CallerContext())
    app = Starlette(routes=[*create_agent_card_routes(card), *rpc])
    return Guard(app, tokens=tokens, max_bytes=max_request_bytes), agent


SHUTDOWN_GRACE = 5
"""Seconds a stopping server waits for its connections once the runs are cancelled."""


class JobServer(uvicorn.Server):
    """uvicorn's server, which cancels the runs in flight as it starts shutting down: their
    streams end (`canceled`), so the connections close and the server exits at once rather
    than waiting for runs that may take hours."""

    def __init__(self, config: uvicorn.Config, agent: JobAgent) -> None:
        super().__init__(config)
        self.agent = agent

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self.agent.close()
        await super().shutdown(sockets)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port` (port 0: one the system picks)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve(
    jobs: Sequence[Job],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    tokens: Sequence[str] = (),
    max_tasks: int = 4,
    max_waiting: int = MAX_WAITING,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    trace_dir: Path = TRACE_FOLDER,
    user_skills: bool = False,
    keep_tasks: int = KEEP_TASKS,
    keep_seconds: float = KEEP_SECONDS,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve `jobs` until cancelled or interrupted (SIGINT, SIGTERM: the runs in flight are
    cancelled first, their traces saying so); `ready` is told the agent's URL once it
    listens. A task that waits for its client's answer is kept (`trace_dir`), to be
    answered after a restart too."""
    if not tokens and not is_loopback(host):
        raise ConfigError(
            f"serving on {host} (not a loopback address) needs a bearer token: --token-env NAME"
        )
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}/"
    app, agent = build_app(
        jobs,
        url,
        tokens=tokens,
        max_tasks=max_tasks,
        max_waiting=max_waiting,
        max_request_bytes=max_request_bytes,
        trace_dir=trace_dir,
        user_skills=user_skills,
        keep_tasks=keep_tasks,
        keep_seconds=keep_seconds,
    )
    config = uvicorn.Config(
        app, log_level="warning", lifespan="off", timeout_graceful_shutdown=SHUTDOWN_GRACE
    )
    server = JobServer(config, agent)
    if ready is not None:
        ready(url)
    try:
        await server.serve(sockets=[sock])
    finally:
        await agent.close()
        sock.close()
