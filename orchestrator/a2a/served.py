"""A job served as an A2A agent: each A2A task is one run of the job (`JobAgent`).

A message starts a task; its text goes into the job's one required input (an input whose
value is null in the spec), or, for a `goal` job without one, becomes the goal. The run goes
on in an asyncio task of its own, with its own trace, and what it does reaches the client as
status updates (a step or sub-agent starting or ending); when it ends, its output is the final
message and the files it wrote are artifacts.

A served run has no one live to ask: a call the permissions mark `ask`, an agent's question
(`questions: true`), a remote agent's input-required wait as in any run (agent/waiting.py),
and a run that ends `input_required` leaves its task `input-required` with what it waits for
(pending.py). The client's next message on the task answers; each answer is checked against
its request, and the run is resumed from its trace with the answers, as `resume --answer`
does, streaming on to its end or its next question. A waiting task is recorded on disk, so
it still waits, and takes its answer, after the server is started again.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import mimetypes
import os
import stat
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2a.helpers import get_message_text
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict
from pydantic import JsonValue

from ..agent.waiting import AnswerRefused, give_answers
from ..errors import ConfigError
from ..events import InputRequest, TaskEnd, TaskStart, TraceEvent
from ..jobs import Job, JobResult
from ..planner import Orchestrator
from ..security import SecretMask
from ..security.inventory import TRACE_FOLDER, reads_no_configuration
from ..trace import Trace, load_checkpoint, new_run_id
from .events import A2ATask
from .pending import (
    PendingTask,
    PendingTasks,
    answers_in,
    open_requests,
    pending_file,
    waiting_data,
    waiting_task,
    waiting_text,
)

MAX_ARTIFACT_BYTES = 1_000_000
"""A file the run wrote larger than this is listed by name, not sent."""
MAX_WAITING = 100
"""A client's tasks that may wait for its answer at once (each keeps a trace and a record)."""


class ServeError(ConfigError):
    """A job that cannot be served as it is (no place for the message's text)."""


def message_input(job: Job) -> str | None:
    """The input a message's text goes into: the job's one required input; None for a goal
    job without one (the text is the goal). ServeError when neither fits."""
    required = [name for name, value in job.inputs.items() if value is None]
    if len(required) == 1:
        return required[0]
    if not required and job.goal is not None:
        return None
    named = ", ".join(required) or "none"
    raise ServeError(
        f"job {job.name!r} cannot take a message: give it exactly one required input (a null "
        f"value under `inputs:`) for the message's text, or a `goal` (required inputs: {named})"
    )


def job_for_message(job: Job, text: str) -> Job:
    """The job to run for one message: its text in the marked input, or as the goal (braces
    doubled, so the text is never read as a template)."""
    name = message_input(job)
    if name is None:
        literal = text.replace("{", "{{").replace("}", "}}")
        return job.model_copy(update={"goal": literal})
    return job.model_copy(update={"inputs": {**job.inputs, name: text}})


@dataclass
class Update:
    """What a served run tells its task: a status (working) or its end (an end state, or
    `input-required` with what it waits for)."""

    state: TaskState
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    result: JobResult | None = None


class ServedRun:
    """One task's run of a job, or its resumption with the client's answers, in an asyncio
    task of its own; `updates` is what its relays publish on the task."""

    def __init__(
        self,
        task: PendingTask,
        job: Job,
        *,
        run_id: str,
        user_skills: bool,
        workspace: asyncio.Lock | None = None,
    ) -> None:
        self.record = task
        """The task, as it is recorded while it waits for an answer."""
        self.task_id = task.task_id
        self.trace_path = Path(task.trace)
        self.run_id = run_id
        self.job = job
        self.user_skills = user_skills
        self.workspace = workspace or asyncio.Lock()
        """Held while the run goes: tasks whose runs share a workspace run one at a time, so
        that one task's files are never another's artifacts."""
        self.updates: asyncio.Queue[Update] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self.orchestrator = Orchestrator.from_job(job, user_skills=user_skills)
        secrets = self.orchestrator.secrets()  # the environment's and the .env files'
        self.mask = SecretMask(secrets)
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run the job from its start."""

        async def first() -> JobResult:
            trace = Trace(
                self.trace_path,
                listeners=[self._listen],
                run_id=self.run_id,
                secrets=self.orchestrator.secrets(),
            )
            try:
                trace.emit(
                    A2ATask, agent="job", task_id=self.task_id, context_id=self.record.context_id
                )
                return await self.orchestrator.run_job(self.job, trace=trace)
            finally:
                trace.close()

        self._go(first)

    def resume(self, answers: Mapping[str, JsonValue]) -> None:
        """Go on with the run from its trace, its open requests given `answers` (as
        `Orchestrator.resume` does for `resume --answer`)."""
        self._go(
            lambda: Orchestrator.resume(
                self.trace_path,
                answers=answers,
                listeners=[self._listen],
                user_skills=self.user_skills,
            )
        )

    def _go(self, work: Callable[[], Awaitable[JobResult]]) -> None:
        self.task = asyncio.create_task(self._run(work), name=f"a2a-task-{self.task_id}")

    async def _run(self, work: Callable[[], Awaitable[JobResult]]) -> None:
        try:
            if self.workspace.locked():
                note = "waiting: another task is running in this job's workspace"
                self.updates.put_nowait(Update(TaskState.TASK_STATE_WORKING, note))
            async with self.workspace:
                result = await work()
        except asyncio.CancelledError:
            self.updates.put_nowait(Update(TaskState.TASK_STATE_CANCELED, "cancelled"))
            raise
        except Exception as exc:  # anything the run did not turn into a result ends the task
            self.updates.put_nowait(Update(TaskState.TASK_STATE_FAILED, f"error: {exc}"))
        else:
            self.updates.put_nowait(_end(result))

    def _listen(self, event: TraceEvent) -> None:
        if not isinstance(event, TaskStart | TaskEnd):
            return
        update = Update(TaskState.TASK_STATE_WORKING, _describe(event), _status_data(event))
        self._loop.call_soon_threadsafe(self.updates.put_nowait, update)

    async def stop(self) -> None:
        """Cancel the run and wait until it has ended (its trace closed and complete)."""
        if self.task is None or self.task.done():
            return
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def _end(result: JobResult) -> Update:
    """The update a run's result makes: its end, or what it waits for."""
    if result.status == "input_required":
        waiting = result.waiting
        return Update(
            TaskState.TASK_STATE_INPUT_REQUIRED,
            waiting_text(waiting),
            waiting_data(waiting),
            result=result,
        )
    return Update(_end_state(result), result.output, result=result)


def _end_state(result: JobResult) -> TaskState:
    if result.status == "completed":
        return TaskState.TASK_STATE_COMPLETED
    if result.status == "cancelled":
        return TaskState.TASK_STATE_CANCELED
    return TaskState.TASK_STATE_FAILED


def _describe(event: TaskStart | TaskEnd) -> str:
    if isinstance(event, TaskStart):
        return f"{event.agent} started"
    return f"{event.agent} {event.status}" + (f": {event.reason}" if event.reason else "")


def _status_data(event: TaskStart | TaskEnd) -> dict[str, Any]:
    fields: dict[str, str | None] = {"type": event.type, "agent": event.agent, "id": event.id}
    if isinstance(event, TaskEnd):
        fields |= {"status": event.status, "reason": event.reason}
    return {"event": {key: value for key, value in fields.items() if value is not None}}


class JobAgent(AgentExecutor):
    """The A2A executor of one or more jobs: a task runs the job its message names (the
    metadata field `skill`, a job's name) or the first one.

    At most `max_tasks` tasks are taken at once; a task past that is rejected, not queued.
    While `max_waiting` of a client's tasks wait for its answer (each kept with its trace), a
    new task of that client is rejected too: answered or cancelled, they make room (a task
    already running that comes to wait is kept all the same).
    Tasks whose jobs share a workspace run one after another (a run's files are the task's
    artifacts); tasks of jobs with workspaces of their own run side by side. Each run writes
    its trace under `trace_dir`, where the tasks waiting for an answer are kept too
    (`pending`: those of an earlier server on the same folder are taken back).
    """

    def __init__(
        self,
        jobs: Sequence[Job],
        *,
        max_tasks: int = 4,
        max_waiting: int = MAX_WAITING,
        trace_dir: Path = TRACE_FOLDER,
        user_skills: bool = False,
    ) -> None:
        for job in jobs:
            message_input(job)  # refused now rather than on the first message
        names = [job.name for job in jobs]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ServeError(f"two jobs are named {', '.join(twice)}: each job is a skill, by name")
        self.jobs = {job.name: job for job in jobs}
        self.default = jobs[0].name
        self.max_tasks = max_tasks
        self.max_waiting = max_waiting
        self.trace_dir = trace_dir
        self.user_skills = user_skills
        self.runs: dict[str, ServedRun] = {}
        self.answering: set[str] = set()
        """Tasks whose client's answers are being checked (a second message waits its turn)."""
        self.workspaces: dict[Path, asyncio.Lock] = {}
        self.pending = PendingTasks.load(pending_file(trace_dir))
        self.restored = self._take_back()
        """The tasks an earlier server left waiting, as the task store gets them back: each
        with its owner."""

    def _take_back(self) -> list[tuple[str, Task]]:
        """The recorded waiting tasks that still wait: their job is served, their trace
        holds open requests. The others are dropped, saying why."""
        found = []
        for task in self.pending:
            if task.job not in self.jobs:
                self.pending.drop(task.task_id, f"its job {task.job!r} is not served here")
                continue
            try:
                requests = open_requests(Path(task.trace))
            except ConfigError as exc:
                self.pending.drop(task.task_id, str(exc))
                continue
            if not requests:
                self.pending.drop(task.task_id, f"its run in {task.trace} waits for nothing")
                continue
            found.append((task.owner, waiting_task(task, requests)))
        return found

    def active(self) -> int:
        return sum(1 for run in self.runs.values() if run.task is not None and not run.task.done())

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id, context.context_id
        if task_id is None or context_id is None:  # the SDK sets both before it calls here
            raise ServeError("a request without a task id or context id")
        updater = TaskUpdater(event_queue, task_id, context_id)
        waiting = self.pending.get(task_id)
        going = task_id in self.runs or task_id in self.answering
        if waiting is not None and not going and context.message is not None:
            self.answering.add(task_id)
            try:
                await self._answer(waiting, context.message, updater)
            finally:
                self.answering.discard(task_id)
            return
        if going:  # a message on a task whose run goes on: noted, the run unchanged
            note = "this task's run is going on; it takes a message only when it asks for one"
            await updater.update_status(TaskState.TASK_STATE_WORKING, _agent_message(updater, note))
            return
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(_new_task(task_id, context_id, context.message))
        refusal = self._refusal(context)
        if refusal is not None:
            await updater.reject(_agent_message(updater, refusal))
            return
        job = self.jobs[self._job_name(context)]
        text = get_message_text(context.message) if context.message is not None else ""
        run_id = new_run_id()  # the trace's file is named by the run it holds
        record = PendingTask(
            task_id=task_id,
            context_id=context_id,
            owner=context.call_context.user.user_name,
            job=job.name,
            trace=str(self.trace_dir / f"{run_id}-a2a-{task_id[:36]}.jsonl"),
        )
        run = self._run_of(record, job_for_message(job, text), run_id)
        run.start()
        await updater.start_work(_agent_message(updater, f"job {job.name} started"))
        await self._relay(run, updater)

    def _run_of(self, record: PendingTask, job: Job, run_id: str) -> ServedRun:
        run = ServedRun(
            record,
            job,
            run_id=run_id,
            user_skills=self.user_skills,
            workspace=self.workspaces.setdefault(
                job.permissions.workspace.expanduser().resolve(), asyncio.Lock()
            ),
        )
        self.runs[record.task_id] = run
        return run

    async def _answer(self, waiting: PendingTask, message: Message, updater: TaskUpdater) -> None:
        """The client's message on a task that waits: its answers checked (a wrong one keeps
        the task waiting, saying why), then the run resumed with them."""
        trace = Path(waiting.trace)
        try:
            if self.active() >= self.max_tasks:  # an answer starts a run: the same cap holds
                raise AnswerRefused(
                    f"busy: {self.max_tasks} tasks are running (the server's --max-tasks); "
                    "send the answer again later"
                )
            answers, run_id = await asyncio.to_thread(_checked_answers, trace, message)
        except AnswerRefused as exc:
            requests = await asyncio.to_thread(open_requests, trace)
            text = waiting_text(requests, refused=str(exc))
            await updater.requires_input(_agent_message(updater, text, waiting_data(requests)))
            return
        except ConfigError as exc:  # its trace is gone or unreadable: it cannot go on
            self.pending.drop(waiting.task_id, str(exc))
            await updater.failed(_agent_message(updater, f"error: {exc}"))
            return
        run = self._run_of(waiting, self.jobs[waiting.job], run_id)
        self.pending.drop(waiting.task_id)
        run.resume(answers)
        given = ", ".join(answers)
        await updater.start_work(_agent_message(updater, f"answered ({given}): the run goes on"))
        await self._relay(run, updater)

    def _refusal(self, context: RequestContext) -> str | None:
        if context.message is None or not get_message_text(context.message).strip():
            return "the message has no text"
        if self._job_name(context) not in self.jobs:
            return f"no job named {self._job_name(context)!r}; jobs: {', '.join(self.jobs)}"
        if self.active() >= self.max_tasks:
            return f"busy: {self.max_tasks} tasks are running (the server's --max-tasks)"
        owner = context.call_context.user.user_name
        waiting = sum(1 for task in self.pending if task.owner == owner)
        if waiting >= self.max_waiting:
            return (
                f"busy: {waiting} of your tasks wait for your answer (the server's "
                "--max-waiting, per client); answer or cancel them first"
            )
        return None

    def _job_name(self, context: RequestContext) -> str:
        named = context.metadata.get("skill") if context.metadata else None
        if named is None and context.message is not None and context.message.metadata:
            named = MessageToDict(context.message.metadata).get("skill")
        return str(named) if named is not None else self.default

    async def _relay(self, run: ServedRun, updater: TaskUpdater) -> None:
        """Publish the run's updates on the task until it ends or waits for answers (then
        the task is recorded as waiting); secrets are masked as in the run's trace."""
        while True:
            update = masked(await run.updates.get(), run.mask)
            if update.state == TaskState.TASK_STATE_WORKING:
                message = _agent_message(updater, update.text, update.data)
                await updater.update_status(update.state, message)
                continue
            self.runs.pop(run.task_id, None)  # ended: the SDK's task store keeps the task
            if update.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                self.pending.add(run.record)
                await updater.requires_input(_agent_message(updater, update.text, update.data))
                return
            await self._finish(run, updater, update)
            return

    async def _finish(self, run: ServedRun, updater: TaskUpdater, update: Update) -> None:
        result = update.result
        data: dict[str, Any] = {"trace": str(run.trace_path), "run": run.run_id}
        if result is not None:
            root = run.orchestrator.permissions.workspace_root()
            for path in result.files:
                await _send_file(updater, Path(path), root, run.mask)
            usage = result.usage
            data["usage"] = {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "total_tokens": usage.total_tokens,
            }
            if result.cost is not None:
                data["cost_usd"] = result.cost
        message = _agent_message(updater, update.text or "(no output)", data)
        await updater.update_status(update.state, message, metadata=data)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await self.stop(context.task_id or "")
        if context.task_id and context.context_id:
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            await updater.cancel(_agent_message(updater, "cancelled by the client"))

    async def stop(self, task_id: str) -> None:
        """Stop the run of a task, or forget that it waits (cancelled by its client)."""
        self.pending.drop(task_id)
        run = self.runs.pop(task_id, None)
        if run is not None:
            await run.stop()

    async def close(self) -> None:
        """Stop every run (the server is shutting down); the tasks that wait for an answer
        stay recorded, for the next server on the same trace folder."""
        await asyncio.gather(*(run.stop() for run in self.runs.values()))


def _checked_answers(trace: Path, message: Message) -> tuple[dict[str, JsonValue], str]:
    """The answers `message` gives the run recorded in `trace`, each checked against its
    request, and the run's id. Raises AnswerRefused, ConfigError (the trace unreadable)."""
    try:
        checkpoint = load_checkpoint(trace)
    except OSError as exc:
        raise ConfigError(f"its trace {trace} cannot be read: {exc.strerror}") from None
    requests: list[InputRequest] = checkpoint.open_requests()
    answers = answers_in(message, requests)
    give_answers(checkpoint, answers)
    return answers, checkpoint.run_id or ""


def _new_task(task_id: str, context_id: str, message: Message) -> Task:
    return Task(
        id=task_id,
        context_id=context_id,
        status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
        history=[message],
    )


def _agent_message(
    updater: TaskUpdater, text: str, data: Mapping[str, Any] | None = None
) -> Message:
    parts = [Part(text=text)]
    if data:
        part = Part()
        part.data.struct_value.update(dict(data))
        parts.append(part)
    return updater.new_agent_message(parts)


def masked(update: Update, mask: SecretMask) -> Update:
    """`update` with every secret in its text and data masked."""
    data = json.loads(mask(json.dumps(update.data))) if update.data else update.data
    result = update.result
    if result is not None:
        result = result.model_copy(update={"output": mask(result.output)})
    return Update(update.state, mask(update.text), data, result)


async def _send_file(updater: TaskUpdater, path: Path, root: Path, mask: SecretMask) -> None:
    """One file the run wrote, as an artifact named by its file name (its bytes when it is
    small enough, else only its name and size), its name and text with their secrets masked
    (a model may name a file after one). Only a regular file inside the workspace is read: a
    link the model made to a file elsewhere is named, never followed."""
    name = mask(path.name)
    try:
        size, data = await asyncio.to_thread(_read_small, path, root)
    except OSError as exc:
        await updater.add_artifact([Part(text=f"cannot be read: {exc.strerror}")], name=name)
        return
    media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if data is None:
        note = f"{name}: {size} bytes, over the {MAX_ARTIFACT_BYTES}-byte limit; not sent"
        await updater.add_artifact([Part(text=note)], name=name)
        return
    try:
        part = Part(text=mask(data.decode("utf-8")), media_type=media, filename=name)
    except UnicodeDecodeError:
        part = Part(raw=data, media_type=media, filename=name)
    await updater.add_artifact([part], name=name)


@reads_no_configuration(
    "a file a served run wrote in its workspace, sent back as an artifact once the run "
    "ended (no link followed, nothing outside the workspace)"
)
def _read_small(path: Path, root: Path) -> tuple[int, bytes | None]:
    """A file's size, and its bytes when it is within the artifact limit; OSError for a
    link, a file that is not regular, or one outside `root`."""
    if not path.parent.resolve().is_relative_to(root):
        raise OSError(errno.EACCES, "outside the workspace; not sent")
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.EACCES, "a link; not sent") from None
        raise
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EACCES, "not a regular file; not sent")
        size = info.st_size
        return size, file.read(MAX_ARTIFACT_BYTES + 1) if size <= MAX_ARTIFACT_BYTES else None
