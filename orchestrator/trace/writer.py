"""The JSONL event trace: one event per line, written and flushed as it happens.

Every event has `seq`, `ts`, `run` (the run's id), `attempt`, `agent` (a path such as
`planner/summarize`) and `type`. Events of type `message` carry whole messages, so
`rebuild_conversations` can restore every conversation from the file alone. Values of
secret-looking environment variables are masked before a line is written. The event kinds and
their fields are typed in orchestrator/events.py; the first event of each attempt carries
`schema`, the version of the format.

One file holds one run: a Trace refuses a file that already holds events, except to resume
the run recorded there (`Trace(path, resume=checkpoint)`), which appends its next attempt
under the same run id. While a Trace writes a file it holds a lock on it, so a second process
cannot resume (or write) a run that is still going.

A run given no trace gets a `NullTrace`: a Trace that records nothing (no file, no events, no
listeners), so the code of a run emits to the trace it holds without asking whether there is
one. Sinks are listeners that every new Trace gets without being asked: `add_sink(factory)` is
the process-wide opt-in switch behind `orchestrator.telemetry.instrument()`. While a sink is
installed, `open_trace(None)` makes an in-memory Trace instead, so a run without a trace file
still reaches it.
"""

from __future__ import annotations

import itertools
import json
import shlex
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, cast

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError
from ..events import (
    EVENT_SCHEMA_VERSION,
    MAX_PROBLEMS,
    Answer,
    Event,
    EventBase,
    InputAnswered,
    Listener,
    ListenerError,
    MessageEvent,
    PartEvent,
    Retry,
    TraceEvent,
    new_run_id,
    problem_in,
)
from ..messages import Message
from ..security.inventory import reads
from ..security.secrets import SecretMask

try:
    import fcntl
except ImportError:  # Windows
    _CAN_LOCK = False
else:
    _CAN_LOCK = True

if TYPE_CHECKING:
    from ..security.signing import LineSigner
    from .checkpoint import AgentHistory, Checkpoint


def _json_value(value: object) -> object:
    """A value the JSON encoder has no form for: a model as its JSON values, else its text."""
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else str(value)


_ENCODER = json.JSONEncoder(default=_json_value, ensure_ascii=False)  # json.dumps makes one a call
_ENVELOPE = ("seq", "ts", "run", "attempt", "type")
"""What every line holds: the fields the writer sets, and the kind's tag."""
P = ParamSpec("P")
E = TypeVar("E", bound=TraceEvent)


class Sink(Protocol):
    """A listener that is told when its trace closes (to end what is still open)."""

    def __call__(self, event: TraceEvent) -> None: ...

    def close(self) -> None: ...


SinkFactory = Callable[["Trace"], Sink]
_SINKS: list[SinkFactory] = []


def add_sink(factory: SinkFactory) -> None:
    """Give every Trace made from now on a sink made by `factory(trace)`."""
    _SINKS.append(factory)


def remove_sink(factory: SinkFactory) -> None:
    """Undo `add_sink` (Traces already made keep their sinks)."""
    if factory in _SINKS:
        _SINKS.remove(factory)


def open_trace(
    trace: Trace | str | Path | None,
    *,
    default: Trace | str | Path | None = None,
    secrets: Iterable[str] | None = None,
) -> tuple[Trace, bool]:
    """The Trace a run writes to, and whether the run opened it (and so must close it).

    The run's own `trace`, else `default` (the trace its agent or orchestrator was made
    with): a Trace is used as it is, a path opens a file. Given neither, the run gets a
    `NullTrace`, unless a sink is installed: then an in-memory Trace, so the sink still sees
    the run. `secrets` are masked in a Trace opened here (by default, those of the
    environment).
    """
    for given in (trace, default):
        if isinstance(given, Trace):
            return given, False
        if isinstance(given, str | Path):
            return Trace(given, secrets=secrets), True
    if _SINKS:
        return Trace(None, secrets=secrets), True
    return NullTrace(f"unrecorded-{next(_UNRECORDED_RUNS)}"), False


_UNRECORDED_RUNS = itertools.count(1)
"""Numbers the runs that record nothing: their models still tell one run from another."""


class TraceExists(ConfigError):
    """The trace file already holds a run: a new run never appends to it."""


class TraceBusy(ConfigError):
    """Another process is writing this trace: its run is still going."""


# An advisory lock on an open trace file, held while a run writes it. A run that is killed
# drops its lock with its process, so `resume` can tell a run that died from one that is still
# going. Where the platform has no `fcntl` (Windows), nothing is locked.


class FileBusy(Exception):
    """Another process holds the lock."""


def lock_file(file: IO[Any]) -> None:
    """Take the file's lock without waiting; raise FileBusy if another process has it."""
    if not _CAN_LOCK:
        return
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise FileBusy(str(getattr(file, "name", "file"))) from None


@reads("trace")
def is_locked(path: str | Path) -> bool:
    """True if another process holds the lock of the file at `path` (its run is going)."""
    if not _CAN_LOCK:
        return False
    try:
        with Path(path).open("rb") as file:
            try:
                fcntl.flock(file.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(file.fileno(), fcntl.LOCK_UN)
    except OSError:
        return False
    return False


class Trace:
    """Writes events to a JSONL file (if a path is given) and hands them to listeners.

    One Trace is shared by every agent of a run; `seq` orders events across all of them, and
    every event carries the run's id (`run_id`, new unless given) and `attempt`. A path that
    already holds events is refused (`TraceExists`) unless `resume` is the checkpoint read
    from it: then the run goes on in the same file, as its next attempt, and `checkpoint` tells
    the run's agents and task graphs what the earlier attempts did. Besides `listeners`, it
    gets one sink from each installed sink factory (see `add_sink`), and closes those sinks
    when it closes. A listener that raises `KeyboardInterrupt` or `SystemExit` stops the runs
    writing here (`on_interrupt`), which complete their record before it is raised again.
    """

    recording = True
    """Whether events emitted here are recorded (written, or heard by listeners): False only
    for the `NullTrace`. Test it before building a costly field that only the record uses."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        listeners: Iterable[Listener] = (),
        secrets: Iterable[str] | None = None,
        run_id: str | None = None,
        resume: Checkpoint | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.mask = SecretMask(secrets)
        self.checkpoint = resume
        self.run_id = resume.run_id if resume and resume.run_id else run_id or new_run_id()
        self.attempt = resume.attempts + 1 if resume else 1
        self._seq = resume.last_seq if resume else 0
        self._first_seq = self._seq + 1
        self._lock = threading.Lock()
        self._failed_listeners: set[int] = set()
        self._recorded: set[str] = set()
        self._on_interrupt: list[Callable[[], None]] = []
        self.interrupted: BaseException | None = None
        """The `KeyboardInterrupt` or `SystemExit` a listener raised, held while the runs
        writing here end with their record complete (`on_interrupt`); None until one did."""
        self.skipped = 0
        """Events no listener heard: not of a known kind and shape (see `problems`)."""
        self.problems: list[str] = []
        """What was wrong with the first of those (`MAX_PROBLEMS`)."""
        self._file: IO[str] | None = None
        self._signer: LineSigner | None = None
        if self.path is not None:
            self._file = self._open(self.path, resume is not None)
            self._signer = _signer(resume)
        self.sinks: list[Sink] = [make(self) for make in list(_SINKS)]
        self.listeners: list[Listener] = [*listeners, *self.sinks]
        if resume is not None and resume.retrying:
            # First in the attempt: a later resume folds the same reopened checkpoint.
            self.emit(Retry, agent="job", paths=list(resume.retrying))
            resume.retrying = []
        if resume is not None:
            for answer in resume.answering:  # what a person answered, before it is used
                request = resume.asked.requests.get(answer.id)
                late = answer.id in resume.asked.late
                self.emit(
                    InputAnswered,
                    agent=request.agent if request is not None else "job",
                    answer=answer,
                    late=True if late else None,
                )
            resume.answering = []

    @reads("trace")
    def _open(self, path: Path, resuming: bool) -> IO[str]:
        path.parent.mkdir(parents=True, exist_ok=True)
        # backslashreplace: a text no message check saw (an error string, say) that holds a
        # lone surrogate is written as its JSON escape instead of failing the write.
        file = path.open("a+", encoding="utf-8", errors="backslashreplace")
        try:
            lock_file(file)
        except FileBusy:
            file.close()
            raise TraceBusy(
                f"trace {path} is being written by another run (its run is still going)"
            ) from None
        file.seek(0, 2)
        grown = self.checkpoint is not None and self.checkpoint.size not in (None, file.tell())
        if grown:
            file.close()
            raise TraceBusy(f"trace {path} was written to since it was read: read it again")
        if file.tell() > 0 and not resuming:
            file.close()
            raise TraceExists(
                f"trace {path} already holds a run; a trace holds one run only. Give a new "
                f"path (or none, for a fresh name under .orchestrator/runs/), or continue that "
                f"run with `orchestrator resume {shlex.quote(str(path))}`"
            )
        if resuming and not _ends_with_newline(path):
            file.write("\n")  # a line torn by the crash stays a line of its own
            file.flush()
        return file

    def emit(self, kind: Callable[P, E], /, *args: P.args, **fields: P.kwargs) -> E | None:
        """Record an event of `kind` (`trace.emit(ToolStart, agent=path, call_id=...)`),
        made from `fields` only when this trace records (a `NullTrace` makes none); returns
        it as recorded. A producer's event that does not validate is written as given, not
        heard by listeners, and counted (`skipped`, said on stderr)."""
        try:
            event = kind(*args, **fields)
        except ValidationError as error:  # a producer's slip: its line is kept all the same
            name = str(cast("type[EventBase]", kind).model_fields["type"].default)
            self.record_unread(name, fields, problem_in(name, error))
            return None
        return self.record(event)

    def record(self, event: E) -> E:
        """Record `event`: it gets its `seq`, time (unless it has one: a worker's relayed
        event keeps when it happened), run id and attempt, is written as one line, and the
        listeners hear that same object."""
        fields = event.__dict__
        written = event.model_fields_set
        with self._lock:
            self._seq += 1
            fields["seq"], fields["run"], fields["attempt"] = self._seq, self.run_id, self.attempt
            if "ts" not in written:
                fields["ts"] = time.time()
            # What the writer sets, and the kind's own tags, belong to the line.
            written.update(_ENVELOPE)
            if isinstance(event, PartEvent):
                written.add("part")
            if self._seq == self._first_seq:
                fields["schema_version"] = EVENT_SCHEMA_VERSION  # the format the attempt writes
                written.add("schema_version")
            listeners = self.listeners
            if self._file is not None:
                self._write(event.as_json())
        if listeners:
            self._tell(listeners, event)
        return event

    def _write(self, encoded: str) -> None:
        """Write one event's line (under the lock): masked, then signed."""
        assert self._file is not None
        line = self.mask(encoded)
        if self._signer is not None:
            line = self._signer.sign(line)
        self._file.write(line + "\n")
        self._file.flush()

    def record_unread(self, kind: str, fields: Mapping[str, Any], problem: str) -> str:
        """Write an event that is not of a known kind and shape as it was given (nothing is
        lost); the listeners do not hear it, and it is counted (`skipped`) with `problem`.
        Returns its line's text (unmasked)."""
        with self._lock:
            self._seq += 1
            seq = self._seq
            line: Event = {"ts": time.time(), **fields, "seq": seq, "run": self.run_id}
            line.update(attempt=self.attempt, type=kind)
            if seq == self._first_seq:
                line["schema"] = EVENT_SCHEMA_VERSION
            encoded = _ENCODER.encode(line)
            if self._file is not None:
                self._write(encoded)
        self._unheard(seq, problem)
        return encoded

    def _tell(self, listeners: list[Listener], event: TraceEvent) -> None:
        failed: list[tuple[Listener, Exception]] = []
        interrupts: list[tuple[Listener, KeyboardInterrupt | SystemExit]] = []
        for listener in listeners:
            try:
                listener(event)
            except Exception as exc:  # a listener's failure never ends the run it listens to
                failed.append((listener, exc))
            except (KeyboardInterrupt, SystemExit) as exc:
                interrupts.append((listener, exc))
        for listener, error in failed:  # after every listener had this event: in order
            self._listener_failed(listener, error)
        for listener, interrupt in interrupts:
            self._interrupt(listener, interrupt)

    def _interrupt(self, listener: Listener, exc: KeyboardInterrupt | SystemExit) -> None:
        """A listener asked the process to stop. Raised here, in the middle of whatever
        emitted, it would end the run with no `run_end` and calls without results: it is held
        (`interrupted`), said in the trace, and the runs writing here are stopped
        (`on_interrupt`); the top run raises it once its record is complete."""
        with self._lock:
            if self.interrupted is not None:
                return
            self.interrupted = exc
            stops = list(self._on_interrupt)
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        self.emit(ListenerError, agent="trace", listener=repr(listener), error=error)
        for stop in stops:
            stop()

    @contextmanager
    def on_interrupt(self, stop: Callable[[], None]) -> Iterator[None]:
        """Within the block, a listener's `KeyboardInterrupt` or `SystemExit` calls `stop`
        (at once, if one came before): a run ends its record, then raises it."""
        with self._lock:
            self._on_interrupt.append(stop)
            interrupted = self.interrupted is not None
        if interrupted:
            stop()
        try:
            yield
        finally:
            with self._lock:
                self._on_interrupt.remove(stop)

    def _unheard(self, seq: int, problem: str) -> None:
        """Count an event the listeners could not read; say the first one on stderr."""
        with self._lock:
            self.skipped += 1
            first = self.skipped == 1
            if len(self.problems) < MAX_PROBLEMS:
                self.problems.append(f"event {seq}: {problem}")
        if first:
            print(
                f"orchestrator: the trace's listeners skip {problem} (event {seq}); "
                "they skip every event they cannot read, and the trace counts them",
                file=sys.stderr,
            )

    def history(self, path: str) -> AgentHistory | None:
        """What the run this trace resumes recorded of the cut-off agent at `path`, for
        `AgentLoop.run(history=...)`: once per path, and None in a trace not opened to resume
        a run (or where that agent's run had ended)."""
        return self.checkpoint.history(path) if self.checkpoint is not None else None

    def left_off(self, path: str) -> bool:
        """Whether the run this trace resumes left the agent at `path` cut off, and its
        history has not been given out: an agent run there without it starts over."""
        return self.checkpoint is not None and self.checkpoint.left_off(path)

    def answer(self, request_id: str) -> Answer | None:
        """The answer a person gave to the request `request_id` of the run this trace
        resumes (agent/waiting.py); None when none was given."""
        if self.checkpoint is None:
            return None
        return self.checkpoint.asked.answers.get(request_id)

    def answered_late(self, request_id: str) -> bool:
        """Whether the answer to `request_id` came after the request had expired."""
        return self.checkpoint is not None and request_id in self.checkpoint.asked.late

    def first_time(self, key: str) -> bool:
        """True the first time this trace is asked about `key`: for what an attempt records
        once and refers to by key afterwards (a tools array's schemas, by their digest)."""
        with self._lock:
            if key in self._recorded:
                return False
            self._recorded.add(key)
            return True

    def _listener_failed(self, listener: Listener, exc: Exception) -> None:
        """Say once per listener, on stderr and in the trace, that it raised; it is still
        called with the events that follow, and so are the others."""
        with self._lock:
            if id(listener) in self._failed_listeners:
                return
            self._failed_listeners.add(id(listener))
        error = f"{type(exc).__name__}: {exc}"
        print(
            f"orchestrator: a trace listener ({listener!r}) raised {error}; the run goes on "
            "(its later errors are not reported)",
            file=sys.stderr,
        )
        self.emit(ListenerError, agent="trace", listener=repr(listener), error=error)

    @contextmanager
    def listening(self, listener: Listener) -> Iterator[None]:
        """`listener` hears the events emitted while inside (as one of `listeners`)."""
        self.listeners = [*self.listeners, listener]  # a new list: `emit` may be iterating
        try:
            yield
        finally:
            self.listeners = [known for known in self.listeners if known is not listener]

    def message(self, agent: str, message: Message) -> None:
        self.emit(MessageEvent, agent=agent, message=message)

    def close(self) -> None:
        with self._lock:
            sinks, self.sinks = self.sinks, []
            if self._file is not None:
                self._file.close()
                self._file = None
        for sink in sinks:
            sink.close()

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NullTrace(Trace):
    """The trace of a run given none: it records nothing and holds no file, no path, no
    checkpoint and no listeners. `emit` drops the event before building it; what it returns
    is empty. `run_id` still tells the run from others (`open_trace` gives each run given no
    trace an id unique in the process); "" for calls made outside any run."""

    recording = False

    def __init__(self, run_id: str = "") -> None:  # none of a Trace's state: nothing is written
        self.path = None
        self.checkpoint = None
        self.run_id = run_id
        self.attempt = 1
        self.mask = SecretMask(())
        self.skipped = 0
        self.problems = []
        self.sinks = []
        self.listeners = []
        self.interrupted = None

    def emit(self, kind: Callable[P, E], /, *args: P.args, **fields: P.kwargs) -> E | None:
        return None

    def record(self, event: E) -> E:
        return event

    @contextmanager
    def on_interrupt(self, stop: Callable[[], None]) -> Iterator[None]:
        yield  # no listener, so no interrupt

    def message(self, agent: str, message: Message) -> None:
        return None

    def first_time(self, key: str) -> bool:
        return True

    @contextmanager
    def listening(self, listener: Listener) -> Iterator[None]:
        """Refused: no event of a run without a trace is heard (make a `Trace()`, in memory,
        to hear them)."""
        raise TypeError(
            "a NullTrace records no events, so a listener would hear none: give the run a "
            "Trace (Trace() keeps its events in memory)"
        )
        yield  # a generator, as `contextmanager` needs

    def close(self) -> None:
        return None

    def __repr__(self) -> str:
        return "NullTrace()"


def _signer(resume: Checkpoint | None) -> LineSigner | None:
    """The signer of a trace file's lines (security/signing.py), going on from the last
    signed line when the run resumes; None, with a warning, when the user has no key or it is
    open to other users."""
    # Signing is loaded with the first trace file a process writes, not with the package.
    from ..security.signing import LineSigner, TraceKeyRefused, user_key

    try:
        key = user_key()
    except TraceKeyRefused as refused:
        warnings.warn(
            f"{refused}; until then traces are not signed, and cannot be resumed", stacklevel=3
        )
        return None
    if key is None:
        warnings.warn(
            "the trace key in your configuration folder can be neither read nor made, so this "
            "trace is not signed and cannot be resumed",
            stacklevel=3,
        )
        return None
    return LineSigner(key, resume.last_mac if resume is not None else "")


@reads("trace")
def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as file:
        file.seek(0, 2)
        if file.tell() == 0:
            return True
        file.seek(-1, 2)
        return file.read(1) == b"\n"
