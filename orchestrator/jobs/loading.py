"""Reading a job spec file: YAML (safe, no duplicate keys), command-line overrides, one error.

`load_job(path)` reads the file with the package's YAML reader (`security/inputs.py`:
safe, alias expansion bounded), applies overrides (`--model`, `--model-option`, `--set`,
`--trace`), validates it as a `Job`, and checks its agents against the sub-agents it can see.
Any problem, at any stage, ends in a single `SpecError` naming the file. The `.env`
files beside the spec and in the working folder are read with it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from pydantic import ValidationError

from ..errors import ConfigError, Problem, SpecError
from ..security.inputs import YamlInputError, load_yaml
from ..security.inventory import DOTENV_FILES, reads
from ..skills.discovery import Folders, discover
from ..tasks import SubagentRegistry, builtin_subagent_folders, suggest
from .spec import FILE_MODELS, Job


def load_job(
    path: str | Path,
    *,
    model: str | None = None,
    model_options: Mapping[str, Any] | None = None,
    inputs: Mapping[str, str] | None = None,
    trace: str | Path | None = None,
    builtin: bool = True,
    user_skills: bool = False,
    text: str | None = None,
    open_inputs: bool = False,
) -> Job:
    """Read and validate a job spec, checking its agents against the sub-agents it can see
    (its own folders, or those of its folder; the user's too with `user_skills`).

    With `text`, that is the spec and `path` only names it (`<stdin>`): its paths resolve
    against the working folder, as if the spec were a file there.
    With `open_inputs`, a required input may stay without a value (`orchestrator serve`:
    each message gives it).
    Raises `SpecError` (a `ConfigError`) naming the file and every problem.
    """
    # The agents a step may name are known before the spec is validated, so that one pass
    # reports every problem, an unknown agent among them. The file is read once: its digest
    # (for `resume`) is of the bytes read here.
    digest = None
    if text is None:
        text = read_spec_text(Path(path))
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    data = read_yaml(Path(path), text)
    folders = _subagent_folders(Path(path), data, user=user_skills)
    registry = SubagentRegistry(folders=[*folders, *builtin_subagent_folders(builtin)])
    return load_spec(
        path,
        known_agents=registry.names,
        agent_schemas={d.name: d.output_spec.schema for d in registry if d.output_spec},
        data=data,
        model=model,
        model_options=model_options,
        inputs=inputs,
        trace=trace,
        open_inputs=open_inputs,
        spec_sha256=digest,
    )


def _subagent_folders(path: Path, data: Mapping[str, Any], *, user: bool) -> list[Path]:
    """The sub-agent folders a spec's raw data points at (its `subagents:`, else its folder's
    project folders): those that exist; the spec's own validation names the others."""
    base = path.resolve().parent
    given = data.get("subagents")
    folders = None
    if isinstance(given, list):
        folders = [(base / str(p)).expanduser().resolve() for p in given if isinstance(p, str)]
        folders = [folder for folder in folders if folder.is_dir()]
    return discover(base, subagents=folders, user=user).subagents


def load_spec(
    path: str | Path,
    *,
    known_agents: Iterable[str] | None = None,
    agent_schemas: Mapping[str, Mapping[str, Any]] | None = None,
    model: str | None = None,
    model_options: Mapping[str, Any] | None = None,
    inputs: Mapping[str, str] | None = None,
    trace: str | Path | None = None,
    text: str | None = None,
    data: dict[str, Any] | None = None,
    open_inputs: bool = False,
    spec_sha256: str | None = None,
) -> Job:
    """Read, override and validate the job spec at `path` (or `text`, or `data`: the spec
    read already, which is changed in place; `spec_sha256`: the digest of the file's bytes
    it was read from), or raise one SpecError.

    `known_agents`: names `agent:` may use (`general` is always known); None skips the check.
    `agent_schemas`: the output schemas of those agents' definitions, by name, which the fields
    of a step without its own `output_schema` are checked against.
    `model`, `model_options`, `inputs` and `trace` override the spec; their paths resolve
    against the current directory, as a user typing them expects.
    """
    path = Path(path)
    data = read_yaml(path, text) if data is None else data
    problems = _override(data, model=model, inputs=inputs or {}, trace=trace)
    if model_options:
        data["model"] = override_model_options(data.get("model"), model_options)
    context = {
        "base_dir": path.resolve().parent,
        "known_agents": None if known_agents is None else set(known_agents),
        "agent_schemas": dict(agent_schemas or {}),
        "source": path,
        "spec_sha256": spec_sha256,
        "dotenv": job_dotenv(path),
        "open_inputs": open_inputs,
    }
    try:
        job = Job.model_validate(data, context=context)
    except ValidationError as error:
        from .problems import problems_from  # loaded by a spec with a problem

        problems += problems_from(error, Job)
    except SpecError as error:
        problems += error.problems
    else:
        if not problems:
            return job
    raise SpecError(path, _blame_flags(problems, model, model_options or {}))


def _blame_flags(
    problems: list[Problem], model: str | None, options: Mapping[str, Any]
) -> list[Problem]:
    """Problems with the job's model that the command line's --model or --model-option
    caused, named by the flag rather than by the spec's `model:` field."""
    blamed = []
    for problem in problems:
        field, _, option = problem.path.partition(".")
        if field == "model" and option in options:
            problem = Problem(f"--model-option {option}", problem.message)
        elif field == "model" and not option and model is not None:
            problem = Problem(f"--model {model}", problem.message)
        blamed.append(problem)
    return blamed


def parse_model_options(options: Sequence[str]) -> dict[str, Any]:
    """`["stream=false", "timeout=120"]` -> `{"stream": False, "timeout": 120}`.

    Each value is read as YAML, so numbers, true/false and `{seed: 7}` mean what they show.
    """
    values: dict[str, Any] = {}
    for option in options:
        key, sep, text = option.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(
                f"--model-option {option!r}: expected KEY=VALUE, e.g. --model-option stream=false"
            )
        try:
            values[key] = load_yaml(text, f"--model-option {key}") if text.strip() else ""
        except YamlInputError:
            values[key] = text
    return values


def model_from_here(model: str) -> str:
    """A model name as a user types it on the command line: a file model's path (a scripted
    or replayed model's) from the working folder, whatever file it is written into."""
    provider, _, target = model.partition(":")
    return f"{provider}:{Path(target).resolve()}" if provider in FILE_MODELS else model


def override_model(current: Any, model: str) -> Any:
    """The spec's model with `--model`: the name replaced. The settings written for the
    spec's model stay when the new name has the same provider (they were meant for that
    server) and are dropped when it does not."""
    provider = model.partition(":")[0]
    name = model_from_here(model)
    if not isinstance(current, dict) or ":" not in model:
        return name
    same_provider = str(current.get("name", "")).partition(":")[0] == provider
    return {**current, "name": name} if same_provider else name


def override_model_options(current: Any, options: Mapping[str, Any]) -> Any:
    """The spec's model with `--model-option` settings over its own."""
    if isinstance(current, dict):
        return {**current, **options}
    return {"name": current, **options}


def parse_set_options(options: Sequence[str]) -> dict[str, str]:
    """`["region=APAC", "year=2025"]` -> `{"region": "APAC", "year": "2025"}`; last one wins."""
    values: dict[str, str] = {}
    for option in options:
        key, sep, value = option.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {option!r}: expected KEY=VALUE, e.g. --set region=APAC")
        values[key] = value
    return values


@reads("job spec")
def read_spec_text(path: Path) -> str:
    """The spec file's text, or a SpecError (missing file, not UTF-8)."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError(path, [Problem("", f"cannot read the file: {error.strerror}")]) from None
    except UnicodeDecodeError as error:
        message = f"not UTF-8 text (byte {error.object[error.start]:#04x} at {error.start})"
        raise SpecError(path, [Problem("", message)]) from None


def read_yaml(path: Path, text: str | None = None) -> dict[str, Any]:
    """The spec file (or `text`, named `path`) as a mapping, or a SpecError (missing file,
    bad YAML, not a mapping)."""
    text = read_spec_text(path) if text is None else text
    try:
        data = load_yaml(text, str(path))
    except YamlInputError as error:
        raise SpecError(path, [Problem("", error.detail)]) from None
    if not isinstance(data, dict):
        expected = "a mapping of fields (name, model, goal or steps, ...)"
        from .problems import describe  # loaded by a spec with a problem

        got = "an empty file" if data is None else describe(data)
        raise SpecError(path, [Problem("", f"expected {expected}, got {got}")])
    return data


def _override(
    data: dict[str, Any],
    *,
    model: str | None,
    inputs: Mapping[str, str],
    trace: str | Path | None,
) -> list[Problem]:
    """Apply overrides to `data` in place; return the problems with `--set` keys."""
    if model is not None:
        data["model"] = override_model(data.get("model"), model)
    if trace is not None:
        data["trace"] = str(Path(trace).resolve())
    declared = data.get("inputs")
    if not inputs or not isinstance(declared, dict | None):
        return []
    declared = dict(declared or {})
    problems = []
    for key, value in inputs.items():
        if key in declared:
            declared[key] = value
        else:
            names = ", ".join(map(str, declared)) or "none"
            hint = suggest(key, declared)
            message = f"{key!r} is not an input of this job{hint}; declared inputs: {names}"
            problems.append(Problem(f"--set {key}", message))
    data["inputs"] = declared
    return problems


# --- What a spec brings along: its folders and its .env files ------------------------------


DOTENV = DOTENV_FILES[0]


@reads("dotenv")
def read_dotenv(folders: Iterable[Path | None]) -> dict[str, str]:
    """The variables of the `.env` file in each folder; a later folder wins over an earlier."""
    values: dict[str, str] = {}
    seen: set[Path] = set()
    for folder in folders:
        if folder is None:
            continue
        path = (folder / DOTENV).resolve()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        found = dotenv_values(path, interpolate=False)
        values.update({name: value for name, value in found.items() if value is not None})
    return values


def job_dotenv(spec: Path, cwd: Path | None = None) -> dict[str, str]:
    """The `.env` variables for the job spec at `spec`: the working folder's, then the spec's."""
    return read_dotenv([cwd or Path.cwd(), spec.resolve().parent])


def job_folders(job: Job, *, user: bool = False, home: Path | None = None) -> Folders:
    """Where `job` finds its skills and sub-agents, and which folders to keep read-only."""
    base = job.source.resolve().parent if job.source is not None else None
    given = job.model_fields_set
    return discover(
        base,
        skills=[item.folder() for item in job.skills] if "skills" in given else None,
        subagents=list(job.subagents) if "subagents" in given else None,
        user=user,
        home=home,
    )
