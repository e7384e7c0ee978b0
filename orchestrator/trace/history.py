"""Run history: the runs whose traces are in a folder, newest first.

Behind `orchestrator trace list` and `trace show last`. Each trace is read once, event by
event; what a line of the list shows comes from `job_start`, `job_end` and the model calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..events import (
    InputAnswered,
    InputRequest,
    InputRequested,
    JobEnd,
    JobStart,
    MessageEvent,
    ModelCall,
    RunEnd,
    TraceEvent,
)
from .asked import Asked
from .reader import TraceReader
from .writer import is_locked


@dataclass
class RunInfo:
    """One run, as its trace tells it."""

    path: Path
    run_id: str | None = None
    job: str | None = None
    goal: str | None = None
    """A run without a job (`ask`, `Orchestrator.run`): what its top-level agent was asked."""
    status: str = "unfinished"
    tokens: int = 0
    cost: float | None = None
    started: float | None = None
    attempts: int = 0
    skipped: list[str] = field(default_factory=list)
    """Lines of the trace that were not events of the right shape, named by line number."""
    asked: Asked = field(default_factory=Asked)
    """What the run asked a person and what was answered."""

    @property
    def waiting(self) -> list[InputRequest]:
        """What a run that ended `input_required` waits for a person to answer."""
        return self.asked.unanswered() if self.status == "input_required" else []

    @property
    def name(self) -> str | None:
        """The job's name, or a run without a job named by its goal: `"Say hello…"`."""
        if self.job is not None or self.goal is None:
            return self.job
        goal = " ".join(self.goal.split())
        return f'"{goal}"' if len(goal) <= 40 else f'"{goal[:39]}…"'


def run_info(path: str | Path) -> RunInfo:
    """What the trace at `path` says of its run. A run whose trace has no end is `running`
    while its process still writes the file, else `unfinished` (it can be resumed)."""
    info = RunInfo(Path(path))
    ended: str | None = None
    reader = TraceReader(path)
    for event in reader:
        _fold(info, event)
        if isinstance(event, JobStart):
            ended = None
        elif isinstance(event, JobEnd) or (
            isinstance(event, RunEnd) and info.job is None and "/" not in event.agent
        ):
            ended = str(event.status)
    info.skipped = reader.problems
    if ended is not None:
        info.status = ended
    elif is_locked(path):
        info.status = "running"
    return info


def _fold(info: RunInfo, event: TraceEvent) -> None:
    info.run_id = info.run_id or event.run
    info.attempts = max(info.attempts, event.attempt)
    if info.started is None and event.ts is not None:
        info.started = event.ts
    if isinstance(event, JobStart):
        info.job = info.job or event.name
    elif isinstance(event, MessageEvent) and info.goal is None and "/" not in event.agent:
        if event.message.role == "user":
            info.goal = event.message.content or ""
    elif isinstance(event, InputRequested | InputAnswered):
        info.asked.take(event)
    elif isinstance(event, ModelCall):
        info.tokens += event.usage.total_tokens
        if event.cost is not None:
            info.cost = (info.cost or 0.0) + float(event.cost)


def list_runs(folder: str | Path, *, limit: int | None = None) -> list[RunInfo]:
    """The runs of every `*.jsonl` trace in `folder`, newest first (by when each file was
    last written, never by a time written inside it)."""
    runs = [run_info(path) for path in traces_in(folder)]
    return runs[:limit] if limit is not None else runs


def latest_trace(folder: str | Path, *, jobs_only: bool = False) -> Path | None:
    """The trace in `folder` written last, if there is one; with `jobs_only`, the newest
    that holds a job's run (`resume` goes on with jobs, not with `ask` runs)."""
    for path in traces_in(folder):
        if not jobs_only or _holds_job(path):
            return path
    return None


def traces_in(folder: str | Path) -> list[Path]:
    """The `*.jsonl` files of `folder`, the one written last first. The file system's own
    times order them: a time inside a file is whatever its writer put there."""
    root = Path(folder)
    if not root.is_dir():
        return []
    found = []
    for path in root.glob("*.jsonl"):
        try:
            if path.is_file():
                found.append((path.stat().st_mtime_ns, path.name, path))
        except OSError:
            continue
    return [path for *_, path in sorted(found, reverse=True)]


def _holds_job(path: Path, *, within: int = 8) -> bool:
    """Whether the trace's first events hold a `job_start` (a job's run, not an `ask`)."""
    for number, event in enumerate(TraceReader(path)):
        if isinstance(event, JobStart):
            return True
        if number >= within:
            break
    return False
