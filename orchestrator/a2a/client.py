"""A fork's task sent to a remote A2A agent, through the SDK's client (`run_remote_task`).

The agent's card is read from its URL (the base URL, or the card's own), its JSON-RPC
interface must be on the same origin as that URL (a card cannot send our task, or our bearer
token, to another host), and the task goes as one streamed message. What streams back is
written to the trace (`a2a_task` with the remote task id, then `a2a_status` per update: past
the first `STATUS_BURST`, at most one a second, the updates between counted as coalesced),
and the task ends with the remote's final message and artifacts as its output: untrusted
text, capped as it arrives (what comes past the cap is counted, not kept), marked as coming
from the remote agent. A remote that reports its usage (metadata
`usage`) is charged on the run's budget; otherwise the result says the cost is unknown.

A remote task that asks for input (or authentication) waits as any call that needs a person
does (agent/waiting.py): what it asks is recorded as a request (kind `remote`, its question
the remote's status text, untrusted), the fork's task ends `input_required` and the run waits
with it; the remote task is left waiting, not cancelled. On `resume` with the answer, the
answer goes to the same remote task (a message with its task and context ids) and the task
is followed on; another question there is the next round (its own request id). The run's
`on_input` may deny instead (the remote task is cancelled, the reason says so) or fail the
run; a declined answer cancels the remote task too.

Whatever goes wrong ends the task `error` with the reason, never a hang: a card or a stream
that fails, a malformed event, a stream that ends before a final state, a task past the
agent's `time_limit`. Cancelling the task (our run cancelled) cancels the remote task too.
On `resume`, a task whose remote id the trace holds is looked up by that id first: a remote
task that ended keeps its result, one still running is followed, one still waiting gets its
answer, and only a task the remote does not know (or that our interrupted attempt had
cancelled) is sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import re
import ssl
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import certifi
import httpx
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, create_client
from a2a.helpers import get_message_text
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from google.protobuf.json_format import MessageToDict

from ..agent import InputRefused, RunResult, Status, TaskResult, ToolContext, WaitingForInput
from ..agent.tools import limit_time
from ..agent.waiting import answer_for, new_request
from ..events import Answer, InputRequest, InputRequested, Retry, TokenCounts
from ..messages import Usage
from ..tasks import RemoteAgent, TaskRequest
from ..trace import read_trace
from .events import A2ACancel, A2AEnd, A2ASend, A2AStatus, A2ATask

MAX_OUTPUT_CHARS = 200_000
"""The most text a remote task brings back (its message and artifacts together)."""
STATUS_BURST = 50
"""Status updates of one remote task written to the trace as they come; past them, at most
one per `STATUS_INTERVAL`, the others counted in the next one written (`coalesced`)."""
STATUS_INTERVAL = 1.0
CANCEL_WAIT = 5.0
"""Seconds to wait for the remote to take a cancellation."""
CONNECT_TIMEOUT = 10.0
MAX_ARTIFACT_NAME = 200
_ARTIFACT_NAME_UNSAFE = re.compile(r'["<>\r\n]')
FINAL: dict[TaskState, Status] = {
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "error",
    TaskState.TASK_STATE_CANCELED: "cancelled",
    TaskState.TASK_STATE_REJECTED: "error",
}
WAITING = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}


class RemoteFailure(Exception):
    """The remote agent could not be used; the message says why (it becomes the reason)."""


class Declined(Exception):  # noqa: N818 - an answer, not a failure
    """What the remote task asked was declined (by a person, or the run's `on_input: deny`)."""


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every remote task (httpx would build one per client: ~0.1 s)."""
    return ssl.create_default_context(cafile=certifi.where())


def split_card_url(url: str) -> tuple[str, str]:
    """The agent's base URL and its card's path, from either URL."""
    marker = "/.well-known/"
    if marker in url:
        base, _, rest = url.partition(marker)
        return base or url, marker + rest
    return url.rstrip("/"), AGENT_CARD_WELL_KNOWN_PATH


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


class RemoteTask:
    """One task's exchange with a remote agent: what came back, and the remote task id."""

    def __init__(self, request: TaskRequest, remote: RemoteAgent, context: ToolContext) -> None:
        self.request = request
        self.remote = remote
        self.context = context
        self.task_id: str | None = None
        self.context_id = ""
        self.state: TaskState | None = None
        self.asked = ""
        """The status text of the remote task's last input-required (its question)."""
        self.asked_status = ""
        self.answered = ""
        """Which input-required status (message id, time) was answered last: shown again,
        it is the task as it stood, not a new question."""
        self.round = 0
        """How many answers this remote task was sent (its next question is this round)."""
        self.texts: list[str] = []
        self.artifacts: dict[str, list[str]] = {}
        self.usage_reported: dict[str, Any] | None = None
        self.kept_chars = 0
        """Characters held in `texts` and `artifacts`: never more than MAX_OUTPUT_CHARS."""
        self.dropped_chars = 0
        """Characters the remote sent past the cap: counted, not kept."""
        self.status_updates = 0
        self.status_written = 0
        self.coalesced = 0
        """Status updates not written since the last one that was."""
        self.coalesced_total = 0
        self._status_written_at = 0.0

    def status(self, state: str, text: str, coalesced: int | None = None) -> None:
        """Record the remote task's state, and its last message's text."""
        self.context.trace.emit(
            A2AStatus,
            agent=self.request.path,
            state=state,
            activity=f"remote task {state}",
            note=text,
            coalesced=coalesced,
        )

    def _headers(self) -> dict[str, str]:
        if self.remote.token_env is None:
            return {}
        token = os.environ.get(self.remote.token_env)
        if not token:
            raise RemoteFailure(
                f"the environment variable {self.remote.token_env} (token_env) is not set"
            )
        return {"Authorization": f"Bearer {token}"}

    async def client(self, http: httpx.AsyncClient) -> Client:
        base, card_path = split_card_url(self.remote.url)
        try:
            card = await A2ACardResolver(http, base, card_path).get_agent_card()
        except (A2AClientError, httpx.HTTPError, ValueError) as exc:
            raise RemoteFailure(f"its agent card could not be read: {exc}") from None
        self._check_card(card, base)
        return await create_client(card, ClientConfig(httpx_client=http, streaming=True))

    def _check_card(self, card: AgentCard, base: str) -> None:
        """The card's interfaces must be on the URL's own origin."""
        if not card.supported_interfaces:
            raise RemoteFailure("its agent card names no interface to send tasks to")
        for interface in card.supported_interfaces:
            if _origin(interface.url) != _origin(base):
                raise RemoteFailure(
                    f"its agent card sends tasks to {interface.url}, not to the origin of "
                    f"{base}; refused (the task and any token stay here)"
                )

    async def run(self, client: Client, prompt: str, resumed: Resumed) -> None:
        """Send the task (or follow the remote task `resumed`) until it ends; each question
        it asks on the way gets the run's answer (`_converse`)."""
        if resumed.task_id is None or not await self._look_up(client, resumed.task_id):
            await self._send(client, prompt)
        else:
            self.round = resumed.answered
        await self._converse(client)

    async def _send(self, client: Client, prompt: str) -> None:
        message = Message(
            role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=prompt)]
        )
        if self.remote.skill is not None:
            message.metadata.update({"skill": self.remote.skill})
        self.context.trace.emit(A2ASend, agent=self.request.path, url=self.remote.url)
        await self._follow(client.send_message(SendMessageRequest(message=message)))

    async def _look_up(self, client: Client, task_id: str) -> bool:
        """A remote task an earlier attempt started: True when it is settled (ended, or
        followed to its end); False when the remote does not know it (send anew)."""
        try:
            task = await client.get_task(GetTaskRequest(id=task_id))
        except A2AClientError:
            self.status("unknown", f"remote task {task_id} not found")
            return False
        if task.status.state == TaskState.TASK_STATE_CANCELED:
            # Our earlier attempt cancelled it (interrupted): it never finished, send anew.
            self.status("canceled", f"remote task {task_id} was cancelled")
            return False
        self.task_id, self.context_id = task_id, task.context_id
        self.context.trace.emit(
            A2ATask,
            agent=self.request.path,
            task_id=task_id,
            context_id=task.context_id,
            resumed=True,
        )
        self._take_task(task)
        if self.state in FINAL or self.state in WAITING:
            return True
        await self._follow(client.subscribe(SubscribeToTaskRequest(id=task_id)))
        return True

    async def _follow(self, stream: Any) -> None:
        async for response in stream:
            if not isinstance(response, StreamResponse):
                raise RemoteFailure(f"it sent an event of an unknown kind: {type(response)}")
            self._take(response)
            if self.state in FINAL or self.state in WAITING:
                return
        if self.state not in FINAL:
            raise RemoteFailure("its stream ended before the task did")

    def _take(self, response: StreamResponse) -> None:
        kind = response.WhichOneof("payload")
        if kind == "task":
            self._take_task(response.task)
        elif kind == "status_update":
            self._note_task(response.status_update.task_id, response.status_update.context_id)
            self._take_status(response.status_update.status.state, response.status_update)
        elif kind == "artifact_update":
            artifact = response.artifact_update.artifact
            chunks = self._artifact(artifact.name or artifact.artifact_id)
            if chunks is None:
                return
            if not response.artifact_update.append:
                self._drop(chunks)
            kept = (self._keep(_part_text(part)) for part in artifact.parts)
            chunks.extend(chunk for chunk in kept if chunk)
        elif kind == "message":
            text = self._keep(get_message_text(response.message))
            if text:
                self.texts.append(text)
            self.state = TaskState.TASK_STATE_COMPLETED  # a direct reply ends the exchange
        else:
            raise RemoteFailure("it sent an event with no payload")

    async def _converse(self, client: Client) -> None:
        """While the remote task asks: give it the answer the run has (a person's, given on
        resume), and follow it on. Raises WaitingForInput when there is none yet (the run
        waits), InputRefused (`on_input: fail`), Declined."""
        while self.state in WAITING:
            request = self._request()
            answer = await answer_for(self._asking(), request)
            if answer.action != "accept":
                by = "the run's on_input" if answer.by != "person" else "a person"
                raise Declined(f"what it asked ({request.id}) was {answer.action}d by {by}")
            await self._answer(client, request, answer)

    def _request(self) -> InputRequest:
        """What the waiting remote task asks, as a request to a person (round `round`)."""
        question = self.asked or "(the remote agent asks for input and says nothing more)"
        if self.state == TaskState.TASK_STATE_AUTH_REQUIRED:
            question = f"The remote agent needs authentication: {question}"
        return new_request(
            self._asking(),
            "remote",
            question,
            source=f"remote agent {self.request.agent!r}",
            state={"task_id": self.task_id, "context_id": self.context_id, "round": self.round},
            round=self.round,
        )

    def _asking(self) -> ToolContext:
        """The run's context as the remote task asks in it: the task's path as the agent,
        the remote task's id as the call (the request's id is made from both)."""
        return dataclasses.replace(
            self.context, agent=self.request.path, call_id=self.task_id or ""
        )

    async def _answer(self, client: Client, request: InputRequest, answer: Answer) -> None:
        """Send `answer` as a new message on the remote task, and follow it on."""
        value = answer.value if isinstance(answer.value, str) else json.dumps(answer.value)
        message = Message(
            role=Role.ROLE_USER,
            message_id=str(uuid.uuid4()),
            task_id=self.task_id or "",
            context_id=self.context_id,
            parts=[Part(text=value)],
        )
        self.context.trace.emit(
            A2ASend,
            agent=self.request.path,
            url=self.remote.url,
            task_id=self.task_id,
            answer=request.id,
        )
        self.round += 1
        self.answered, self.state = self.asked_status, TaskState.TASK_STATE_WORKING
        self._drop(self.texts)  # the question: what the task says next replaces it
        await self._follow(client.send_message(SendMessageRequest(message=message)))

    def _note_task(self, task_id: str, context_id: str) -> None:
        if task_id and self.task_id is None:
            self.task_id = task_id
            self.context_id = context_id
            self.context.trace.emit(
                A2ATask,
                agent=self.request.path,
                task_id=task_id,
                context_id=context_id,
                url=self.remote.url,
            )

    def _take_task(self, task: Task) -> None:
        self._note_task(task.id, task.context_id)
        for artifact in task.artifacts:
            chunks = self._artifact(artifact.name or artifact.artifact_id)
            if chunks is None:
                continue
            self._drop(chunks)
            kept = (self._keep(_part_text(part)) for part in artifact.parts)
            chunks.extend(chunk for chunk in kept if chunk)
        self._take_status(task.status.state, task)

    def _artifact(self, given: str) -> list[str] | None:
        """The kept chunks of the artifact a remote names `given` (its name cut to
        `MAX_ARTIFACT_NAME` characters, quotes and line breaks replaced); a new name counts
        under the cap like text, and past the cap a new artifact is not kept at all."""
        name = _ARTIFACT_NAME_UNSAFE.sub("_", given[:MAX_ARTIFACT_NAME]) or "artifact"
        found = self.artifacts.get(name)
        if found is not None:
            return found
        if len(self._keep(name)) < len(name):
            return None
        return self.artifacts.setdefault(name, [])

    def _keep(self, text: str) -> str:
        """What of `text` fits under the cap (the rest is counted as dropped)."""
        room = max(0, MAX_OUTPUT_CHARS - self.kept_chars)
        kept = text[:room]
        self.kept_chars += len(kept)
        self.dropped_chars += len(text) - len(kept)
        return kept

    def _drop(self, chunks: list[str]) -> None:
        """Forget `chunks` (a replaced artifact, an earlier text): they no longer count."""
        self.kept_chars -= sum(len(chunk) for chunk in chunks)
        chunks.clear()

    def _take_status(self, state: TaskState, source: Any) -> None:
        message = source.status.message
        if state in WAITING:
            shown = _status_key(source)
            if shown and shown == self.answered:
                return  # the question answered, as the task stood (a snapshot sent first)
            self.asked_status = shown
        self.state = state
        text = get_message_text(message) if message.parts else ""
        found = [MessageToDict(source.metadata)] if source.HasField("metadata") else []
        found += [MessageToDict(part.data) for part in message.parts if part.HasField("data")]
        for data in found:  # only `usage` is read: nothing else a remote sends is kept
            if isinstance(data, dict) and isinstance(data.get("usage"), dict):
                self.usage_reported = data["usage"]
        ended = self.state in FINAL or self.state in WAITING
        if self.state in WAITING:
            self.asked = text
        self._note_status(state, text, ended)
        if ended and text:
            self._drop(self.texts)
            self.texts = [self._keep(text)]

    def _note_status(self, state: TaskState, text: str, ended: bool) -> None:
        """Write the update to the trace, unless the remote sends them faster than a trace
        should grow: then it is counted in the next one written."""
        self.status_updates += 1
        now = time.monotonic()
        if (
            not ended
            and self.status_written >= STATUS_BURST
            and now - self._status_written_at < STATUS_INTERVAL
        ):
            self.coalesced += 1
            self.coalesced_total += 1
            return
        name = TaskState.Name(state).removeprefix("TASK_STATE_").lower()
        self.status(name, text[:500], self.coalesced or None)
        self.status_written += 1
        self.coalesced = 0
        self._status_written_at = now

    def output(self) -> str:
        parts = [t for t in self.texts if t]
        for name, chunks in self.artifacts.items():
            parts.append(f'<artifact name="{name}">\n' + "".join(chunks) + "\n</artifact>")
        text = "\n\n".join(parts)
        head = f"[untrusted: the answer of the remote agent at {self.remote.url}]"
        if self.dropped_chars:  # said first: the observation may show only the beginning
            head += (
                f"\n[{self.dropped_chars} characters not kept: the remote sent more than "
                f"{MAX_OUTPUT_CHARS} characters]"
            )
        return f"{head}\n{text}" if text else ""

    def usage(self) -> Usage | None:
        reported = self.usage_reported
        if reported is None:
            return None
        numbers = {k: int(v) for k, v in reported.items() if isinstance(v, int | float)}
        given = {k: max(0, numbers.get(k, 0)) for k in ("input_tokens", "output_tokens")}
        return Usage(**given, total_tokens=given["input_tokens"] + given["output_tokens"])

    async def cancel(self, client: Client) -> str:
        """Cancel the remote task, if there is one; what became of it."""
        if self.task_id is None or self.state in FINAL:
            return "no remote task to cancel"
        try:
            async with asyncio.timeout(CANCEL_WAIT):
                await client.cancel_task(CancelTaskRequest(id=self.task_id))
        except (A2AClientError, httpx.HTTPError, TimeoutError) as exc:
            self.context.trace.emit(
                A2ACancel,
                agent=self.request.path,
                task_id=self.task_id,
                ok=False,
                error=str(exc)[:300],
            )
            return f"the remote task {self.task_id} could not be cancelled ({exc})"
        self.context.trace.emit(A2ACancel, agent=self.request.path, task_id=self.task_id, ok=True)
        return f"the remote task {self.task_id} was cancelled"


def _status_key(source: Any) -> str:
    """What tells one status of a task from another: its message's id and its time."""
    status = source.status
    when = status.timestamp.ToJsonString() if status.HasField("timestamp") else ""
    return f"{status.message.message_id}@{when}" if status.message.message_id or when else ""


def _part_text(part: Part) -> str:
    if part.HasField("text"):
        return part.text
    if part.HasField("data"):
        return str(MessageToDict(part.data))
    if part.HasField("url"):
        return f"(a file at {part.url})"
    if part.HasField("raw"):
        return f"({len(part.raw)} bytes of {part.media_type or 'data'}, not shown)"
    return ""


@dataclasses.dataclass(frozen=True)
class Resumed:
    """What an earlier attempt of this run recorded of the remote task at one path: its id,
    and how many answers it was sent."""

    task_id: str | None = None
    answered: int = 0


def resumed_task(context: ToolContext, path: str) -> Resumed:
    """The remote task an earlier attempt of this run started for the task at `path`."""
    trace = context.trace
    if trace.checkpoint is None or trace.path is None:
        return Resumed()
    found = Resumed()
    for event in read_trace(trace.path):
        if isinstance(event, A2ATask) and event.agent == path and event.task_id != found.task_id:
            found = Resumed(event.task_id)
        elif isinstance(event, A2ASend) and event.agent == path and event.answer is not None:
            if event.task_id == found.task_id:
                found = Resumed(found.task_id, found.answered + 1)
        elif isinstance(event, Retry):
            # `resume --retry-failed`: a task that runs again here (it failed, or used what
            # failed) is sent anew; a task that kept its result is restored before this.
            found = Resumed()
    return found


async def run_remote_task(
    request: TaskRequest, remote: RemoteAgent, context: ToolContext
) -> TaskResult:
    """Run `request` on the remote agent; how it went, as any task's result."""
    base: dict[str, Any] = {
        "id": request.spec.id,
        "agent": request.agent,
        "path": request.path,
        "depends_on": request.spec.depends_on,
        "started_at": time.time(),
    }
    exchange = RemoteTask(request, remote, context)
    timeout = httpx.Timeout(remote.time_limit, connect=min(CONNECT_TIMEOUT, remote.time_limit))
    status: Status = "error"
    reason: str | None = None
    waiting: list[InputRequest] = []
    try:
        headers = exchange._headers()
        async with httpx.AsyncClient(headers=headers, timeout=timeout, verify=_tls()) as http:
            client = await exchange.client(http)
            try:
                resumed = resumed_task(context, request.path)
                async with limit_time(remote.time_limit):
                    await exchange.run(client, request.prompt, resumed)
                status, reason = _ended(exchange)
            except WaitingForInput as asked:  # left waiting there: answered on resume
                for waits in asked.requests:
                    context.trace.emit(InputRequested, agent=request.path, request=waits)
                status, waiting = "input_required", asked.requests
            except (InputRefused, Declined) as exc:
                reason = f"it asked for input: {exc}; {await exchange.cancel(client)}"
            except TimeoutError:
                cancelled = await exchange.cancel(client)
                reason = f"time limit of {remote.time_limit:g} s reached; {cancelled}"
            except asyncio.CancelledError:
                cancelled = await asyncio.shield(exchange.cancel(client))
                status, reason = "cancelled", f"cancelled; {cancelled}"
            except (A2AClientError, httpx.HTTPError, ValueError, RemoteFailure) as exc:
                cancelled = await exchange.cancel(client)
                reason = f"{_describe(exc)}; {cancelled}"
            finally:
                with contextlib.suppress(Exception):
                    await client.close()
    except RemoteFailure as exc:
        reason = str(exc)
    except (A2AClientError, httpx.HTTPError, ValueError) as exc:
        reason = _describe(exc)
    usage = exchange.usage()
    if usage is not None:
        _charge(context, usage)
    unknown = "" if usage is not None else "; its cost is unknown (the remote reported none)"
    context.trace.emit(
        A2AEnd,
        agent=request.path,
        status=status,
        usage_reported=usage is not None,
        usage=TokenCounts.of(usage) if usage is not None else None,
        activity="",
        status_updates=exchange.status_updates,
        status_coalesced=exchange.coalesced_total or None,
        truncated_chars=exchange.dropped_chars or None,
    )
    output = exchange.output()
    if status != "completed":
        reason = f"remote agent {request.agent!r}: {reason}" if reason else None
    else:
        reason = unknown.removeprefix("; ") or None
    # A run of its own, so that what the remote reported counts in every total above it, and
    # what it waits for reaches the top of the run.
    run = RunResult(
        agent=request.path,
        status=status,
        text=output,
        usage=usage or Usage(),
        error=reason,
        waiting=waiting,
    )
    return TaskResult(
        **base,
        status=status,
        output=output,
        reason=reason,
        usage=usage or Usage(),
        ended_at=time.time(),
        run=run,
    )


def _ended(exchange: RemoteTask) -> tuple[Status, str | None]:
    state = exchange.state
    if state is not None and state in FINAL:
        status = FINAL[state]
        name = TaskState.Name(state).removeprefix("TASK_STATE_").lower()
        return status, None if status == "completed" else f"the remote task ended {name}"
    return "error", "its task ended in no final state"


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]


def _charge(context: ToolContext, usage: Usage) -> None:
    """What the remote agent reported it used, charged to the run's budget and every budget
    above it (it is known only after the fact, so it may take the budget past its cap)."""
    if context.budget is not None:
        context.budget.charge(usage.total_tokens)
