"""Many jobs: one run of a job spec per input row, a results file with one line per row.

    rows = read_rows("rows.csv")        # or rows.jsonl: one JSON object per line
    batch = Batch("job.yaml", results="rows.results.jsonl", concurrency=4)
    await batch.run(rows, start_job)

Each row's columns that the spec declares as `inputs` fill them (the others are kept in its
results line, unused); its id is its `id` column, or its number (1 for the first row).
At most `concurrency` jobs run at once. Each job gets a trace of its own; its line in the
results file (JSON) says how it ended: `row`, `id`, `status`, `output` (and `data`, the
output step's validated structured answer, when it has an `output_schema`), `usage`, `trace`,
`refused` (what the safety rules refused each time it was tried), `waiting` (a row that
ended `input_required`: what it waits for a person to answer, `resume --answer` on its
trace goes on; docs/waiting.md), and `error` when it could not start. Lines are appended as
jobs end, so an interrupted batch keeps what it finished, and running the batch again skips
the rows whose last line says `completed` (the others run again, and get a new line; one
that waited for a person goes on from its trace instead). Each line is masked as `run --json`
is: the values of secret-looking variables, and the credentials in URLs, never reach it.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..messages import Usage
from ..security import SecretMask, secrets_from_environment
from ..security.inputs import JsonInputError, json_lines, load_json
from ..security.inventory import reads
from .loading import job_dotenv, load_job, read_yaml
from .runner import JobResult
from .spec import Job


@dataclass
class Row:
    """One input row: its number (from 1), its id, and its values."""

    number: int
    id: str
    values: dict[str, str]


@reads("batch results")
def read_rows(path: str | Path) -> list[Row]:
    """The rows of a CSV file (with a header line) or a JSONL file (one object per line)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the inputs {path}: {exc.strerror}") from None
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        records = _jsonl(path, text)
    elif path.suffix.lower() == ".csv":
        records = csv_records(text, f"inputs {path}")
    else:
        raise ConfigError(f"inputs {path}: expected a .csv or .jsonl file")
    rows = [
        Row(n, _text(r.get("id")) or str(n), {str(k): _text(v) for k, v in r.items()})
        for n, r in enumerate(records, start=1)
    ]
    seen: set[str] = set()
    for row in rows:
        if row.id in seen:
            raise ConfigError(f"inputs {path}: row {row.number} repeats the id {row.id!r}")
        seen.add(row.id)
    return rows


def csv_records(text: str, source: str) -> list[dict[str, Any]]:
    """The rows of a CSV text with a header line, read whole: a field may be as long as the
    text (csv's own limit, 131,072 characters, is raised to that), a line ends only where the
    CSV says so (not at U+2028 or at a line break inside quotes). A ConfigError names `source`
    and the line when it is not CSV."""
    if csv.field_size_limit() < len(text):
        csv.field_size_limit(len(text))  # the text is already in memory: its size bounds a field
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        return list(reader)
    except csv.Error as exc:
        raise ConfigError(f"{source}, line {reader.line_num}: not CSV ({exc})") from None


def _jsonl(path: Path, text: str) -> list[dict[str, Any]]:
    records = []
    for number, line in json_lines(text):
        try:
            record = load_json(line, f"inputs {path}", line=number)
        except JsonInputError as exc:
            raise ConfigError(str(exc)) from None
        if not isinstance(record, dict):
            raise ConfigError(f"inputs {path}, line {number}: expected a JSON object")
        records.append(record)
    return records


def _text(value: Any) -> str:
    """A row's value as an input's text: JSON numbers and booleans as they read."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


@reads("batch results")
def last_lines(results: Path) -> dict[str, dict[str, Any]]:
    """Each row's last line in `results`, by row id. A line that cannot be read is a
    ConfigError naming the file and the line: skipped, it would run a row again."""
    last: dict[str, dict[str, Any]] = {}
    if not results.is_file():
        return {}
    try:
        text = results.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the results {results}: {exc}") from None
    for number, line in json_lines(text):
        try:
            record = load_json(line, str(results), line=number)
        except JsonInputError as exc:
            raise ConfigError(f"{exc}; mend or remove the line") from None
        if not isinstance(record, dict) or "id" not in record:
            raise ConfigError(
                f"{results}, line {number}: not a results line (a JSON object with an id)"
            )
        last[str(record["id"])] = record
    return last


StartJob = Callable[[Job, Row], Awaitable[JobResult]]
ResumeJob = Callable[[Path], Awaitable[JobResult]]
"""Goes on with a row's run from its trace (one that waited for a person)."""


class Batch:
    """Runs one job per row of a spec, `concurrency` at a time, appending to `results`."""

    def __init__(
        self,
        spec: str | Path,
        *,
        results: str | Path,
        concurrency: int = 4,
        load: Callable[..., Job] = load_job,
        on_line: Callable[[dict[str, Any]], None] | None = None,
        secrets: Iterable[str] | None = None,
    ) -> None:
        """`secrets`: values masked in the results file (and in what `on_line` gets); by
        default the secret-looking variables of the jobs' environment, `.env` files included.
        """
        if concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
        self.spec = Path(spec)
        self.results = Path(results)
        self.concurrency = concurrency
        self.load = load
        self.on_line = on_line
        self.declared = set((read_yaml(self.spec).get("inputs") or {}).keys())
        if secrets is None:
            secrets = secrets_from_environment({**os.environ, **job_dotenv(self.spec)})
        self._secrets = set(secrets)
        self.mask = SecretMask(self._secrets)
        self.usage = Usage()
        self.lines: list[dict[str, Any]] = []

    async def run(
        self, rows: Iterable[Row], start: StartJob, resume: ResumeJob | None = None
    ) -> list[dict[str, Any]]:
        """Run every row not done yet; returns the lines written by this run. With `resume`,
        a row whose last line says `input_required` goes on from its trace (answered since
        with `orchestrator resume`, it has its result; else it waits again) instead of
        running again from the start."""
        last = last_lines(self.results)
        todo = [row for row in rows if last.get(row.id, {}).get("status") != "completed"]
        self.results.parent.mkdir(parents=True, exist_ok=True)
        gate = asyncio.Semaphore(self.concurrency)

        def waited(row: Row) -> Path | None:
            """The trace file of a row that waited for a person, if it is still there."""
            line = last.get(row.id, {})
            recorded = line.get("trace")
            if line.get("status") != "input_required" or not isinstance(recorded, str):
                return None
            return Path(recorded) if Path(recorded).is_file() else None

        going_on = {row.id: found for row in todo if (found := waited(row)) is not None}

        async def one(row: Row) -> None:
            waiting_run = going_on.get(row.id)
            async with gate:
                if resume is not None and waiting_run is not None:
                    self._write(await self._run_row(row, lambda _, __: resume(waiting_run)))
                else:
                    self._write(await self._run_row(row, start))

        async with asyncio.TaskGroup() as group:
            for row in todo:
                group.create_task(one(row))
        return self.lines

    def mask_also(self, secrets: Iterable[str]) -> None:
        """Mask `secrets` too from now on: the credentials a row's job names (a model's
        `api_key_env`, a remote agent's `token_env`), known once its orchestrator is made."""
        new = set(secrets) - self._secrets
        if new:
            self._secrets |= new
            self.mask = SecretMask(self._secrets)

    def inputs_of(self, row: Row) -> dict[str, str]:
        return {k: v for k, v in row.values.items() if k in self.declared}

    async def _run_row(self, row: Row, start: StartJob) -> dict[str, Any]:
        line: dict[str, Any] = {"row": row.number, "id": row.id, "inputs": row.values}
        try:
            job = self.load(self.spec, inputs=self.inputs_of(row))
            result = await start(job, row)
        except ConfigError as exc:
            return {**line, "status": "error", "error": str(exc)}
        except Exception as exc:  # one row's failure is its line, never the whole batch's end
            return {**line, "status": "error", "error": f"{type(exc).__name__}: {exc}"}
        self.usage = self.usage + result.usage
        return {
            **line,
            "status": result.status,
            "output": result.output,
            **({"data": result.data} if result.data is not None else {}),
            "usage": result.usage.model_dump(),
            "cost": result.cost,
            "trace": result.trace,
            **({"refused": refused} if (refused := result.refused_by_agent()) else {}),
            **({"waiting": [r.shown() for r in result.waiting]} if result.waiting else {}),
        }

    @reads("batch results")
    def _write(self, line: Mapping[str, Any]) -> None:
        # A job's output or error can repeat a secret (a model or tool echoing a key): the
        # results file is masked as `run --json` is.
        text = self.mask(json.dumps(line, ensure_ascii=False, default=str))
        with self.results.open("a", encoding="utf-8") as file:
            file.write(text + "\n")
        masked = json.loads(text)
        self.lines.append(masked)
        if self.on_line is not None:
            self.on_line(dict(masked))
