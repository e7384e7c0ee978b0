"""Reading an eval file: its structure, its cases and variants, and every check across them,
in one pass that ends in one `EvalError` naming each problem's field path.

    loaded = load_eval("examples/evals/skill-ab.eval.yaml")
    for variant in loaded.variants: ...
    job = loaded.job_for(variant, case)
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import ConfigError, Problem
from ..jobs import Job, SpecError, load_job
from ..jobs.batch import csv_records
from ..jobs.loading import read_yaml
from ..jobs.problems import problems_from
from ..security.inputs import JsonInputError, json_lines, load_json
from ..security.inventory import reads
from ..tasks import suggest
from .python_checks import PythonCheck, python_check
from .spec import (
    PROBE_KINDS,
    REFERENCE,
    TEMPLATE,
    Case,
    EvalError,
    EvalSpec,
    Scorer,
    Variant,
    shown_value,
)


@dataclass
class LoadedEval:
    """An eval file, read and checked: its cases (ids filled in) and its variants (named)."""

    spec: EvalSpec
    source: Path
    cases: list[Case]
    variants: list[Variant]
    python_checks: dict[str, PythonCheck]
    """The Python checks, by their `python:` text (imported and called only in a sandboxed
    process, python_checks.py)."""
    skill: Path | None = None
    """The skill folder an eval made from its `evals.json` measures (benchmark.json's
    `skill_path`); None for an eval file."""

    @property
    def folder(self) -> Path:
        return self.source.resolve().parent

    def job_for(self, variant: Variant, case: Case, *, model: str | None = None) -> Job:
        """The job as `variant` changes it, with `case`'s inputs (`model` overrides both)."""
        return job_for(self.spec, self.source, variant, case.inputs, model=model)

    def scorers_for(self, case: Case) -> list[Scorer]:
        return [*self.spec.scorers, *case.scorers]


def load_eval(path: str | Path, *, text: str | None = None) -> LoadedEval:
    """Read and check the eval file at `path` (or `text`, named `path`); raises `EvalError`
    with every problem found."""
    source = Path(path)
    try:
        data = read_yaml(source, text)
    except SpecError as error:
        raise EvalError(source, error.problems) from None
    context = {"base_dir": source.resolve().parent, "source": source}
    try:
        spec = EvalSpec.model_validate(data, context=context)
    except ValidationError as error:
        raise EvalError(source, problems_from(error, EvalSpec)) from None
    problems: list[Problem] = []
    cases = _cases(spec, problems)
    variants = _variants(spec, context, problems)
    jobs = _jobs(spec, source, variants, cases, problems)
    if spec.probes:
        variants.insert(0, _reference(spec, source, problems))
    if jobs:
        problems += _case_problems(spec, cases, jobs[0])
    problems += _probe_problems(spec, cases)
    problems += _compared(spec, variants, cases)
    python_checks = _python_checks(spec, cases, source.resolve().parent, problems)
    problems += _schemas(spec, cases)
    if problems:
        raise EvalError(source, problems)
    return LoadedEval(spec, source, cases, variants, python_checks)


# --- Cases ----------------------------------------------------------------------------------


def _cases(spec: EvalSpec, problems: list[Problem]) -> list[Case]:
    cases = read_cases(spec.cases, problems) if isinstance(spec.cases, Path) else list(spec.cases)
    if not cases and not problems:
        problems.append(Problem("cases", "needs at least one case"))
    named = [case.model_copy(update={"id": case.id or str(n)}) for n, case in enumerate(cases, 1)]
    seen: set[str] = set()
    for index, case in enumerate(named):
        if case.id in seen:
            problems.append(Problem(f"cases[{index}].id", f"{case.id!r} names two cases"))
        seen.add(str(case.id))
    return named


@reads("eval")
def read_cases(path: Path, problems: list[Problem]) -> list[Case]:
    """The cases of a `.csv` file (a header line; `id`, `expected.NAME` and input columns) or
    a `.jsonl` file (one case per line, as written inline, or flat: its other keys inputs)."""
    where = f"cases ({path.name}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem("cases", f"cannot read {path}: {exc}"))
        return []
    suffix = path.suffix.lower()
    if suffix == ".csv":
        try:
            records = list(enumerate(csv_records(text, str(path)), 1))
        except ConfigError as exc:
            problems.append(Problem("cases", str(exc)))
            return []
        records = [(n, _from_columns(r)) for n, r in records]
    elif suffix in (".jsonl", ".ndjson"):
        records = []
        for number, line in json_lines(text):
            try:
                value = load_json(line, path.name, line=number)
            except JsonInputError as exc:
                problems.append(Problem(f"{where} line {number})", exc.problem))
                continue
            if not isinstance(value, dict):
                problems.append(Problem(f"{where} line {number})", "expected a JSON object"))
                continue
            records.append((number, value if "inputs" in value else _from_columns(value)))
    else:
        problems.append(Problem("cases", f"{path}: expected a list, a .csv or a .jsonl file"))
        return []
    unit = "row" if suffix == ".csv" else "line"
    cases = []
    for number, record in records:
        try:
            cases.append(Case.model_validate(record))
        except ValidationError as error:
            for problem in problems_from(error, Case):
                problems.append(
                    Problem(f"{where} {unit} {number}).{problem.path}", problem.message)
                )
    return cases


_CASE_KEYS = ("id", "expected", "files", "scorers")


def _from_columns(record: dict[str, Any]) -> dict[str, Any]:
    """A flat record (a CSV row): `id`, `expected.NAME` columns, the rest inputs."""
    case: dict[str, Any] = {"inputs": {}, "expected": {}}
    for key, value in record.items():
        key = str(key)
        if key.startswith("expected."):
            case["expected"][key.removeprefix("expected.")] = value
        elif key in _CASE_KEYS:
            case[key] = value
        else:
            case["inputs"][key] = value
    if case.get("id") == "":
        del case["id"]
    return case


# --- Variants and the job -------------------------------------------------------------------


def _variants(spec: EvalSpec, context: dict[str, Any], problems: list[Problem]) -> list[Variant]:
    base = spec.variants or [Variant()]
    found = list(base)
    if spec.matrix:
        found = []
        keys = list(spec.matrix)
        for variant in base:
            for values in itertools.product(*(spec.matrix[k] for k in keys)):
                chosen = dict(zip(keys, values, strict=True))
                data = {**variant.model_dump(exclude_defaults=True), **chosen}
                if variant.name:
                    shown = "-".join(shown_value(v) for v in chosen.values())
                    data["name"] = re.sub(r"[^A-Za-z0-9_-]", "-", f"{variant.name}-{shown}")[:64]
                try:
                    found.append(Variant.model_validate(data, context=context))
                except ValidationError as error:
                    for problem in problems_from(error, Variant):
                        key = problem.path.split(".")[0].split("[")[0]
                        where = f"matrix.{key}" if key in chosen else f"variants.{problem.path}"
                        problems.append(Problem(where, problem.message))
    titles = [variant.title() for variant in found]
    for index, title in enumerate(titles):
        if title in titles[:index]:
            problems.append(Problem(f"variants[{index}]", f"two variants are named {title!r}"))
        if spec.probes and title == REFERENCE:
            message = f"{REFERENCE!r} names the run the probes compare with; rename this one"
            problems.append(Problem(f"variants[{index}]", message))
    return found


def _reference(spec: EvalSpec, source: Path, problems: list[Problem]) -> Variant:
    """The variant the probes compare with: the job with `reference_window` (or its model as
    it is), run first."""
    window = spec.reference_window
    reference = Variant(
        name=REFERENCE, model_options={"context_window": window} if window is not None else {}
    )
    if window is None:
        return reference
    try:
        job_for(spec, source, reference, {})
    except SpecError as error:  # the job's own problems are named once, by `_jobs`
        for problem in error.problems:
            if problem.path.startswith("--model-option"):
                problems.append(Problem("reference_window", problem.message))
    except ConfigError:
        pass
    return reference


def job_for(
    spec: EvalSpec,
    source: Path,
    variant: Variant,
    inputs: dict[str, str | None],
    *,
    model: str | None = None,
    open_inputs: bool = False,
) -> Job:
    """The eval's job as `variant` changes it, with `inputs` (`open_inputs`: a required one
    may stay without a value, for checking its structure). Raises SpecError."""
    given = {k: v for k, v in inputs.items() if v is not None}
    options = variant.model_options or None
    if isinstance(spec.job, Path):
        job = load_job(
            spec.job,
            model=model or variant.model,
            model_options=options,
            inputs=given,
            open_inputs=open_inputs,
        )
    else:
        text = yaml.safe_dump(copy.deepcopy(spec.job), sort_keys=False)
        try:
            job = load_job(
                source,
                model=model or variant.model,
                model_options=options,
                inputs=given,
                text=text,
                open_inputs=open_inputs,
            )
        except SpecError as error:
            problems = [
                Problem(f"job.{p.path}" if p.path else "job", p.message) for p in error.problems
            ]
            raise SpecError(source, problems) from None
    # Where a person must answer, the eval decides, not the job: no one answers an eval's run.
    job = job.model_copy(update={"on_input": spec.on_input})
    if variant.disclosure is not None:
        job = job.model_copy(update={"disclosure": variant.disclosure})
    if variant.compaction is not None:
        # The job's and every step's: a strategy under test is the one each step's agent uses.
        steps = [step.model_copy(update={"compaction": variant.compaction}) for step in job.steps]
        job = job.model_copy(update={"compaction": variant.compaction, "steps": steps})
    return job


def _jobs(
    spec: EvalSpec,
    source: Path,
    variants: Sequence[Variant],
    cases: Sequence[Case],
    problems: list[Problem],
) -> list[Job]:
    """The job of each variant (with no case's inputs: a required one may stay open), each
    problem once."""
    jobs = []
    seen: set[str] = set()
    for index, variant in enumerate(variants):
        try:
            jobs.append(job_for(spec, source, variant, {}, open_inputs=True))
        except SpecError as error:
            where = "job" if not spec.variants and not spec.matrix else f"variants[{index}]"
            for problem in error.problems:
                option = problem.path.removeprefix("--model-option ")
                if option != problem.path:  # the variant's own setting, as the eval names it
                    item = Problem(f"{where}.model_options.{option}", problem.message)
                elif error.source != source:  # a problem in the job's own file
                    item = Problem(where, f"{error.source}: {problem}")
                else:
                    item = problem if where == "job" else Problem(where, str(problem))
                if str(item) not in seen:
                    seen.add(str(item))
                    problems.append(item)
        except ConfigError as error:
            problems.append(Problem(f"variants[{index}]" if spec.variants else "job", str(error)))
    return jobs


def _case_problems(spec: EvalSpec, cases: Sequence[Case], job: Job) -> list[Problem]:
    """Each case's inputs are the job's; the `{expected.X}` and `{inputs.X}` its checks name
    are there."""
    problems = []
    declared = job.inputs
    names = ", ".join(declared) or "none"
    for index, case in enumerate(cases):
        where = f"cases[{index}]" if not isinstance(spec.cases, Path) else f"cases ({case.id})"
        for key in case.inputs:
            if key not in declared:
                message = f"not an input of the job{suggest(key, declared)}; its inputs: {names}"
                problems.append(Problem(f"{where}.inputs.{key}", message))
        for key, value in declared.items():
            if value is None and case.inputs.get(key) is None:
                problems.append(Problem(f"{where}.inputs", f"the job needs the input {key!r}"))
        checks = [(f"scorers[{i}]", s) for i, s in enumerate(spec.scorers)]
        checks += [(f"{where}.scorers[{i}]", s) for i, s in enumerate(case.scorers)]
        for path, scorer in checks:
            for text in scorer.texts():
                for kind, name in TEMPLATE.findall(text):
                    known = case.expected if kind == "expected" else {**declared, **case.inputs}
                    if name not in known:
                        problems.append(
                            Problem(
                                path, f"{{{kind}.{name}}}: case {case.id!r} has no {kind} {name!r}"
                            )
                        )
    return problems


def _probe_problems(spec: EvalSpec, cases: Sequence[Case]) -> list[Problem]:
    """Each probe's id is its own, its checks read a text, and the `{expected.X}` and
    `{inputs.X}` they name are in every case; `probe_model` and `reference_window` come with
    probes."""
    problems = []
    if not spec.probes:
        for field in ("probe_model", "reference_window"):
            if getattr(spec, field) is not None:
                problems.append(Problem(field, "applies to probes; the eval has none"))
        return problems
    seen: set[str] = set()
    allowed = ", ".join(PROBE_KINDS)
    for index, probe in enumerate(spec.probes):
        if probe.id in seen:
            problems.append(Problem(f"probes[{index}].id", f"{probe.id!r} names two probes"))
        seen.add(probe.id)
        for number, check in enumerate(probe.checks):
            where = f"probes[{index}].checks[{number}]"
            if check.kind not in PROBE_KINDS:
                message = f"a probe's answer is a text: a {check.kind} check does not apply"
                problems.append(Problem(f"{where}.{check.kind}", f"{message}; use {allowed}"))
                continue
            for text in check.texts():
                for kind, name in TEMPLATE.findall(text):
                    for case in cases:
                        known = case.expected if kind == "expected" else case.inputs
                        if name not in known:
                            message = f"{{{kind}.{name}}}: case {case.id!r} has no {kind} {name!r}"
                            problems.append(Problem(where, message))
                            break
    return problems


def _compared(spec: EvalSpec, variants: Sequence[Variant], cases: Sequence[Case]) -> list[Problem]:
    """The baseline is one of the variants; the files the cases copy in are there."""
    problems = []
    titles = [variant.title() for variant in variants]
    if spec.baseline is not None and spec.baseline not in titles:
        message = f"{spec.baseline!r} is not a variant{suggest(spec.baseline, titles)}"
        problems.append(Problem("baseline", f"{message}; variants: {', '.join(titles)}"))
    for index, case in enumerate(cases):
        for name, path in case.copies.items():
            if not path.is_file():
                problems.append(Problem(f"cases[{index}].copies.{name}", f"{path} is not a file"))
    return problems


# --- Python scorers and JSON schemas ---------------------------------------------------------


def _python_checks(
    spec: EvalSpec, cases: Iterable[Case], folder: Path, problems: list[Problem]
) -> dict[str, PythonCheck]:
    """The `python:` checks, read without importing their code (python_checks.py)."""
    found: dict[str, PythonCheck] = {}
    for path, scorer in _every_check(spec, cases):
        if scorer.python is None or scorer.python in found:
            continue
        try:
            found[scorer.python] = python_check(scorer.python, folder)
        except ConfigError as error:
            problems.append(Problem(f"{path}.python", str(error)))
    return found


def _every_check(spec: EvalSpec, cases: Iterable[Case]) -> list[tuple[str, Scorer]]:
    """Every check of the eval, with its field path: its scorers, each case's, each probe's."""
    checks = [(f"scorers[{i}]", s) for i, s in enumerate(spec.scorers)]
    for case in cases:
        checks += [(f"cases ({case.id}).scorers[{i}]", s) for i, s in enumerate(case.scorers)]
    for index, probe in enumerate(spec.probes):
        checks += [(f"probes[{index}].checks[{i}]", s) for i, s in enumerate(probe.checks)]
    return checks


def _schemas(spec: EvalSpec, cases: Iterable[Case]) -> list[Problem]:
    checks = _every_check(spec, cases)
    schemas = [(path, s.json_schema) for path, s in checks if s.json_schema is not None]
    if not schemas:
        return []
    try:
        jsonschema: Any = importlib.import_module("jsonschema")
    except ImportError:
        message = "needs the jsonschema package: pip install 'orchestrator[eval]'"
        return [Problem(f"{path}.json_schema", message) for path, _ in schemas]
    problems = []
    for path, schema in schemas:
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as error:
            problems.append(
                Problem(f"{path}.json_schema", f"not a valid JSON schema: {error.message}")
            )
    return problems
