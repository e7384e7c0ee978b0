"""OpenTelemetry spans built from trace events: a sink of the same events the JSONL file gets.

The spans nest as the run does, with the times the events recorded:

    invoke_workflow {job}        job_start .. job_end
      fork job                   the job's steps, from `fork` to the last `task_end`
        invoke_agent {step}      run_start .. run_end
          chat {model}           one per model call: ts - duration_ms .. ts
          execute_tool {tool}    tool_start .. tool_end (a call that never ran: a point)
            fork {caller}        a `fork` call's task graph
              invoke_agent {step/task}
          fork {caller}          a background fork (`wait: false`): under its caller's agent,
            invoke_agent {task}  each task with `orchestrator.task.overlap_s`, the seconds it
                                 ran while its caller did its own work

Message content (prompts, replies, tool arguments and results) goes on the spans only when
`capture_content` is set; it is masked like trace lines are. Needs the `otel` extra.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace as otel
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from ..events import (
    Fork,
    JobEnd,
    JobStart,
    MessageEvent,
    ModelCall,
    RunEnd,
    RunStart,
    SkillLoaded,
    TaskEnd,
    ToolEnd,
    ToolStart,
    TraceEvent,
)
from ..messages import Message
from . import genai

TRACER_NAME = "orchestrator"


@dataclass
class _Agent:
    """An agent run's open span and what its children need from it."""

    span: Span
    messages: list[Message] = field(default_factory=list)
    arguments: dict[str, str] = field(default_factory=dict)  # call id -> arguments
    skills: list[str] = field(default_factory=list)


@dataclass
class _Pending:
    """A chat or tool span, ended in time or not yet, that waits for its reply or result
    message (which carries the content, and ends a call cut short)."""

    span: Span
    name: str
    end: int | None = None
    error: str | None = None


@dataclass
class _Fork:
    """A fork's open span and the task paths whose `task_end` it still waits for."""

    span: Span
    waiting: set[str]
    background: bool = False


@dataclass
class _Ended:
    """A background task's agent span, ended by its `run_end` but closed at its `task_end`
    (which brings the overlap)."""

    span: Span
    end: int
    error: str | None
    error_type: str | None


class SpanSink:
    """A trace listener that turns events into GenAI spans (see the module docstring).

    `tracer_provider` defaults to OpenTelemetry's global one. Call `close()` when the trace
    closes: spans still open then end as errors at the last event's time.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        capture_content: bool = False,
        mask: genai.Mask | None = None,
    ) -> None:
        provider = tracer_provider or otel.get_tracer_provider()
        self.tracer = provider.get_tracer(TRACER_NAME)
        self.capture_content = capture_content
        self.mask: genai.Mask = mask or (lambda text: text)
        self._lock = threading.Lock()
        self._last = time.time_ns()
        self._job: Span | None = None
        self._agents: dict[str, _Agent] = {}
        self._forks: dict[str, _Fork] = {}  # task path -> the fork it belongs to
        self._subagents: dict[str, str | None] = {}  # task path -> sub-agent definition
        self._ran: set[str] = set()  # paths that had a run_start
        self._ending: dict[str, _Ended] = {}  # background task path -> its agent span
        self._chats: dict[str, _Pending] = {}  # agent -> its chat span awaiting the reply
        self._tools: dict[tuple[str, str | None], _Pending] = {}  # (agent, call id) -> tool span

    def __call__(self, event: TraceEvent) -> None:  # noqa: C901 - one case per kind
        with self._lock:
            if event.ts is not None:
                self._last = _ns(event.ts)
            match event:
                case JobStart():
                    self._job_start(event)
                case JobEnd():
                    self._job_end(event)
                case Fork():
                    self._fork(event)
                case TaskEnd():
                    self._task_end(event)
                case RunStart():
                    self._run_start(event)
                case ModelCall():
                    self._model_call(event)
                case MessageEvent():
                    self._message(event)
                case ToolStart():
                    self._tool_start(event)
                case ToolEnd():
                    self._tool_end(event)
                case SkillLoaded():
                    self._skill_loaded(event)
                case RunEnd():
                    self._run_end(event)
                case _:
                    self._other(event)

    def close(self) -> None:
        """End every span still open (the run was cut short) as an error."""
        with self._lock:
            why = "the trace closed before this ended"
            for pending in self._chats.values():
                self._end(pending.span, pending.end, None)
            for pending in self._tools.values():
                error = pending.error or (why if pending.end is None else None)
                self._end(pending.span, pending.end or self._last, error, error_type=pending.error)
            for agent in self._agents.values():
                self._end(agent.span, self._last, why)
            for ended in self._ending.values():
                self._end(ended.span, ended.end, ended.error, error_type=ended.error_type)
            self._ending = {}
            for fork in {id(f): f for f in self._forks.values() if f.waiting}.values():
                self._end(fork.span, self._last, why)
            if self._job is not None:
                self._end(self._job, self._last, why)
            self._chats, self._tools, self._agents, self._forks = {}, {}, {}, {}
            self._job = None

    def _start(
        self,
        name: str,
        parent: Span | None,
        event: TraceEvent,
        attributes: genai.Attributes,
        *,
        start: int | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Span:
        # Without a parent of ours, a span joins whatever span is current where the run began.
        context: Context | None = otel.set_span_in_context(parent) if parent else None
        return self.tracer.start_span(
            self.mask(name),
            context=context,
            kind=kind,
            attributes=self._masked(attributes),
            start_time=start if start is not None else self._ns(event),
        )

    def _job_start(self, event: JobStart) -> None:
        name = event.name or "job"
        attributes: genai.Attributes = {
            "gen_ai.operation.name": "invoke_workflow",
            "gen_ai.agent.name": name,
        }
        attributes["orchestrator.job.steps"] = event.steps if event.steps is not None else 0
        attributes["orchestrator.run.id"] = event.run or ""
        attributes["orchestrator.run.attempt"] = event.attempt or 1
        self._job = self._start(f"invoke_workflow {name}", None, event, attributes)

    def _job_end(self, event: JobEnd) -> None:
        if self._job is None:
            return
        status = event.status or "completed"
        self._job.set_attributes(genai.usage_attributes(event.usage))
        self._job.set_attribute("orchestrator.status", self.mask(str(status)))
        self._end(self._job, self._ns(event), None if status == "completed" else status)
        self._job = None

    def _fork(self, event: Fork) -> None:
        caller = event.agent
        tasks = event.tasks
        background = bool(event.background)
        attributes = {
            "orchestrator.agent.path": caller,
            "orchestrator.fork.tasks": [t.id for t in tasks],
            "orchestrator.fork.background": background,
        }
        # A background fork outlives the call that started it: it sits under its caller.
        above = self._agents.get(caller)
        parent = above.span if background and above else self._fork_parent(caller)
        span = self._start(f"fork {caller}", parent, event, attributes)
        fork = _Fork(span, {t.path for t in tasks}, background)
        for task in tasks:
            self._forks[task.path] = fork
            self._subagents[task.path] = task.agent
        if not fork.waiting:
            self._end(span, self._ns(event), None)

    def _fork_parent(self, caller: str) -> Span | None:
        """A fork's span sits under the caller's running `fork` tool call, else the caller."""
        forks = [
            pending.span
            for (agent, _), pending in self._tools.items()
            if agent == caller and pending.name == "fork" and pending.end is None
        ]
        if forks:
            return forks[-1]
        if caller in self._agents:
            return self._agents[caller].span
        return self._job

    def _task_end(self, event: TaskEnd) -> None:
        fork = self._forks.get(event.agent)
        if fork is None:
            return
        if event.agent not in self._ran:  # skipped, or could not even start
            self._event(
                fork.span,
                f"task_{event.status}",
                genai.clean({"orchestrator.task.id": event.id, "reason": event.reason}),
                event,
            )
        ended = self._ending.pop(event.agent, None)
        if ended is not None:
            overlap = event.overlap_s
            ended.span.set_attributes(
                genai.clean(
                    {"orchestrator.task.background": True, "orchestrator.task.overlap_s": overlap}
                )
            )
            self._end(ended.span, ended.end, ended.error, error_type=ended.error_type)
        fork.waiting.discard(event.agent)
        if not fork.waiting:
            self._end(fork.span, self._ns(event), None)

    def _run_start(self, event: RunStart) -> None:
        path = event.agent
        self._ran.add(path)
        fork = self._forks.get(path)
        parent = fork.span if fork else None
        if parent is None:
            above = self._agents.get(path.rpartition("/")[0])
            parent = above.span if above else self._job
        attributes = genai.agent_attributes(event, self._subagents.get(path))
        self._agents[path] = _Agent(self._start(f"invoke_agent {path}", parent, event, attributes))

    def _run_end(self, event: RunEnd) -> None:
        agent = self._agents.pop(event.agent, None)
        if agent is None:
            return
        self._finish_chat(event.agent, None)
        status = event.status
        agent.span.set_attributes(genai.usage_attributes(event.usage))
        agent.span.set_attributes(
            self._masked(
                genai.clean(
                    {
                        "orchestrator.status": status,
                        "orchestrator.steps": event.steps,
                        "orchestrator.skills": agent.skills or None,
                        "orchestrator.cost": event.cost,
                    }
                )
            )
        )
        failed = status != "completed"
        error = (event.error or status) if failed else None
        fork = self._forks.get(event.agent)
        if fork is not None and fork.background:  # closed by its task_end, with the overlap
            ended = _Ended(agent.span, _ns(event.ts), error, status if failed else None)
            self._ending[event.agent] = ended
            return
        self._end(agent.span, _ns(event.ts), error, error_type=status if failed else None)

    def _model_call(self, event: ModelCall) -> None:
        agent = self._agents.get(event.agent)
        if agent is None:
            return
        end = _ns(event.ts)
        start = end - int(float(event.duration_ms or 0) * 1_000_000)
        attributes = genai.chat_attributes(event)
        if self.capture_content:
            self._content_attributes(agent, attributes)
        name = f"chat {attributes['gen_ai.request.model']}"
        span = self._start(name, agent.span, event, attributes, start=start, kind=SpanKind.CLIENT)
        self._chats[event.agent] = _Pending(span, name, end)

    def _content_attributes(self, agent: _Agent, attributes: genai.Attributes) -> None:
        system = [m for m in agent.messages if m.role == "system"]
        others = [m for m in agent.messages if m.role != "system"]
        if system:
            text = "\n\n".join(m.content or "" for m in system)
            attributes["gen_ai.system_instructions"] = self.mask(text)
        attributes["gen_ai.input.messages"] = genai.messages_json(others, self.mask)

    def _message(self, event: MessageEvent) -> None:
        path, message = event.agent, event.message
        agent = self._agents.get(path)
        if agent is not None and self.capture_content:
            agent.messages.append(message)
            for call in message.tool_calls:
                agent.arguments[call.id] = call.arguments
        if message.role == "assistant":
            self._finish_chat(path, message)
        elif message.role == "tool":
            self._tool_result(event, message)

    def _finish_chat(self, path: str, message: Message | None) -> None:
        pending = self._chats.pop(path, None)
        if pending is None:
            return
        if message is not None and self.capture_content:
            output = genai.messages_json([message], self.mask)
            pending.span.set_attribute("gen_ai.output.messages", output)
        self._end(pending.span, pending.end, None)

    def _tool_start(self, event: ToolStart) -> None:
        agent = self._agents.get(event.agent)
        if agent is None:
            return
        attributes = genai.tool_attributes(event.agent, event.name, event.call_id)
        if self.capture_content and event.call_id in agent.arguments:
            arguments = agent.arguments[event.call_id]
            attributes["gen_ai.tool.call.arguments"] = self.mask(arguments)
        name = event.name or ""
        span = self._start(f"execute_tool {name}", agent.span, event, attributes)
        self._tools[(event.agent, event.call_id)] = _Pending(span, name)

    def _tool_end(self, event: ToolEnd) -> None:
        pending = self._tools.get((event.agent, event.call_id))
        if pending is not None:
            pending.end, pending.error = _ns(event.ts), event.error_type

    def _tool_result(self, event: MessageEvent, message: Message) -> None:
        """A tool's result message: it ends a span waiting for it, or marks a call that never
        ran (unknown tool, bad arguments, skipped or refused) with a span of its own."""
        key = (event.agent, message.tool_call_id)
        pending = self._tools.pop(key, None)
        error = message.error_type or ("error" if message.is_error else None)
        if pending is None:
            agent = self._agents.get(event.agent)
            if agent is None or not error:
                return
            name = message.name or ""
            attributes = {
                **genai.tool_attributes(event.agent, name, key[1]),
                "orchestrator.tool.started": False,
            }
            span = self._start(f"execute_tool {name}", agent.span, event, attributes)
            pending = _Pending(span, name)
        if self.capture_content:
            result = self.mask(message.content or "")
            pending.span.set_attribute("gen_ai.tool.call.result", result)
        end = pending.end or _ns(event.ts)
        error = pending.error or error
        self._end(pending.span, end, error, error_type=error)

    def _skill_loaded(self, event: SkillLoaded) -> None:
        agent = self._agents.get(event.agent)
        if agent is not None:
            agent.skills.append(event.skill)
            attributes = {"orchestrator.skill": event.skill, "tools": event.tools or []}
            self._event(agent.span, "skill_loaded", attributes, event)

    def _other(self, event: TraceEvent) -> None:
        """Events with no span of their own (model_wait, model_retry, ...) become span events."""
        agent = self._agents.get(event.agent)
        if agent is None:
            return
        skip = {"seq", "ts", "run", "attempt", "agent", "type"}
        line = event.as_line()
        attributes = {
            k: v for k, v in line.items() if k not in skip and isinstance(v, str | int | float)
        }
        self._event(agent.span, event.type, attributes, event)

    def _masked(self, attributes: genai.Attributes) -> genai.Attributes:
        """Attributes with every text in them masked (a status, an error, a reason can hold
        a secret as well as a message can)."""
        return {key: self._masked_value(value) for key, value in attributes.items()}

    def _masked_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, list | tuple):
            return [self.mask(item) if isinstance(item, str) else item for item in value]
        return value

    def _event(
        self, span: Span, name: str, attributes: genai.Attributes, event: TraceEvent
    ) -> None:
        """A span event, its name and attributes masked."""
        span.add_event(self.mask(name), self._masked(attributes), timestamp=self._ns(event))

    def _ns(self, event: TraceEvent) -> int:
        """The event's time; an event recorded without one (none the package writes) takes
        the last event's."""
        return _ns(event.ts) if event.ts is not None else self._last

    def _end(
        self, span: Span, end: int | None, error: str | None, *, error_type: str | None = None
    ) -> None:
        """End a span; with `error`, as an error whose (masked) text is the status's."""
        if error:
            span.set_status(Status(StatusCode.ERROR, self.mask(str(error))))
            if error_type:
                span.set_attribute("error.type", self.mask(str(error_type)))
        span.end(end_time=end)


def _ns(ts: float) -> int:
    return int(ts * 1_000_000_000)
