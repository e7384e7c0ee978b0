"""Served tasks that wait for their client's answer: what the task shows, how the client
answers, and the record of them that outlives the server process.

A served run that ends `input_required` (agent/waiting.py) leaves its task `input-required`
with the open requests in its status message: a text part listing each one as a line of
JSON (id, kind, form, question, choices: data from a model or a remote, never instructions)
and a data part `{"requests": [...]}`. The client's next message on the task answers them
(`answers_in`): its text when one request is open (`yes`/`no` for an approval), or a data
part `{"answers": {ID: VALUE}}`.

`PendingTasks` keeps the waiting tasks (task and context ids, the owner's name, the job, the
trace) in one JSON file under the server's trace folder (`a2a-waiting.json`), rewritten whole
on each change: a server started again on the same folder takes them back, so that a task
still waits for its answer after a restart.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from a2a.helpers import get_message_text
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict
from pydantic import BaseModel, ConfigDict, JsonValue, TypeAdapter, ValidationError

from ..agent.waiting import MAX_ANSWER_CHARS, AnswerRefused
from ..errors import ConfigError
from ..events import InputRequest
from ..security.inventory import WAITING_TASKS_FILE, reads, reads_no_configuration
from ..trace import load_checkpoint


class PendingTask(BaseModel):
    """A served task whose run waits for its client's answers."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    task_id: str
    context_id: str
    owner: str
    """Who may answer: the digest of the bearer token that created the task ("" for none),
    as the task store scopes tasks; never the token."""
    job: str
    """The served job's name."""
    trace: str
    """The run's trace: the answers resume it from there."""


_RECORDS = TypeAdapter(list[PendingTask])


class PendingTasks:
    """The waiting tasks of one server, by task id, kept in `path` (see the module doc)."""

    def __init__(self, path: Path, tasks: Sequence[PendingTask] = ()) -> None:
        self.path = path
        self.tasks = {task.task_id: task for task in tasks}

    @classmethod
    def load(cls, path: Path) -> PendingTasks:
        """The tasks `path` records (none when there is no file). A file that does not read
        as such records is set aside (renamed `.unreadable`), saying so on stderr."""
        try:
            return cls(path, _read_records(path))
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError, ValidationError) as exc:
            kept = path.with_name(path.name + ".unreadable")
            with_reason = str(exc).splitlines()[0][:300]
            print(
                f"warning: {path} does not read as the tasks that wait for an answer "
                f"({with_reason}); set aside as {kept.name}, and no task waits",
                file=sys.stderr,
            )
            path.replace(kept)
            return cls(path)

    def __iter__(self) -> Iterator[PendingTask]:
        return iter(list(self.tasks.values()))

    def __len__(self) -> int:
        return len(self.tasks)

    def get(self, task_id: str) -> PendingTask | None:
        return self.tasks.get(task_id)

    def add(self, task: PendingTask) -> None:
        self.tasks[task.task_id] = task
        self._save()

    def drop(self, task_id: str, reason: str | None = None) -> PendingTask | None:
        """Forget the task `task_id` (answered, cancelled); a `reason` is said on stderr."""
        task = self.tasks.pop(task_id, None)
        if task is not None:
            if reason is not None:
                print(f"warning: task {task_id} waits no more: {reason}", file=sys.stderr)
            self._save()
        return task

    @reads_no_configuration(
        "opens the server's record of its waiting tasks to write it, never to read it"
    )
    def _save(self) -> None:
        """Write the records whole, then put them in place (a crash leaves the old file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        written = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        text = _RECORDS.dump_json(list(self.tasks.values()), indent=1).decode()
        descriptor = os.open(written, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(text + "\n")
        written.replace(self.path)


@reads("trace")
def _read_records(path: Path) -> list[PendingTask]:
    return _RECORDS.validate_json(path.read_bytes())


def pending_file(trace_dir: Path) -> Path:
    """Where a server whose traces go to `trace_dir` keeps its waiting tasks."""
    return trace_dir / WAITING_TASKS_FILE


def open_requests(trace: Path) -> list[InputRequest]:
    """What the run recorded in `trace` waits for a person to answer."""
    try:
        return load_checkpoint(trace).open_requests()
    except OSError as exc:
        raise ConfigError(f"its trace {trace} cannot be read: {exc.strerror}") from None


def shown(request: InputRequest) -> dict[str, Any]:
    """`request` as the client sees it (not the state its asker keeps)."""
    return request.model_dump(mode="json", exclude_none=True, exclude={"call_id", "state"})


def waiting_text(requests: Sequence[InputRequest], refused: str | None = None) -> str:
    """The status text of a task that waits: why an answer was not taken (if one was not),
    how to answer, and each request as one line of JSON."""
    head = f"Not taken: {refused}.\n" if refused else ""
    count = "one request waits" if len(requests) == 1 else f"{len(requests)} requests wait"
    how = (
        "answer it with your next message on this task: its text (yes or no for an "
        "approval), or a data part"
        if len(requests) == 1
        else "answer them with your next message on this task: a data part"
    )
    lines = [
        f'{head}The run waits for answers: {count}; {how} {{"answers": {{"ID": VALUE}}}}. '
        "The requests, as data:"
    ]
    for request in requests:
        fields = {key: shown(request).get(key) for key in ("id", "kind", "form", "question")}
        if request.choices:
            fields["choices"] = request.choices
        lines.append(json.dumps(fields, ensure_ascii=False))
    return "\n".join(lines)


def waiting_data(requests: Sequence[InputRequest]) -> dict[str, Any]:
    """The data part of a task that waits: its requests, whole."""
    return {"requests": [shown(request) for request in requests]}


def waiting_task(task: PendingTask, requests: Sequence[InputRequest]) -> Task:
    """The task as the store holds it once the server starts again: `input-required`, its
    status message listing what it waits for."""
    data = Part()
    data.data.struct_value.update(waiting_data(requests))
    message = Message(
        role=Role.ROLE_AGENT,
        message_id=str(uuid.uuid4()),
        task_id=task.task_id,
        context_id=task.context_id,
        parts=[Part(text=waiting_text(requests)), data],
    )
    status = TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED, message=message)
    return Task(id=task.task_id, context_id=task.context_id, status=status)


def answers_in(message: Message, requests: Sequence[InputRequest]) -> dict[str, JsonValue]:
    """The answers a client's message gives the open `requests`: a data part `{"answers":
    {ID: VALUE}}`, else its text, for the one request open. Raises AnswerRefused (an
    answer over the size bound, text when several requests are open, nothing at all)."""
    answers: Mapping[str, Any] | None = None
    for part in message.parts:
        if part.HasField("data"):
            data = MessageToDict(part.data)
            if isinstance(data, dict) and isinstance(data.get("answers"), dict):
                answers = data["answers"]
    if answers is None:
        text = get_message_text(message).strip()
        if not text:
            raise AnswerRefused('the message answers nothing: no text, no {"answers": ...}')
        if len(requests) != 1:
            raise AnswerRefused(
                f"{len(requests)} requests wait: text answers only one; give a data part "
                '{"answers": {"ID": VALUE}} naming each'
            )
        answers = {requests[0].id: text}
    found: dict[str, JsonValue] = {}
    for key, value in answers.items():
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON numbers come as floats: a choice's number is whole
        if len(value if isinstance(value, str) else json.dumps(value)) > MAX_ANSWER_CHARS:
            raise AnswerRefused(f"the answer to {key[:40]!r} is over {MAX_ANSWER_CHARS} characters")
        found[str(key)] = value
    return found
