"""A skill folder's own eval files, as Anthropic's skill-creator lays them out, run as evals.

    files = find_eval_files(Path("my-skill"))
    trigger = trigger_eval(files, SkillEvalOptions(out=Path("out"), models=["openai:gpt-4o"]))
    result = run_eval_sync(trigger.loaded, EvalOptions(out=Path("out/trigger")))

Two files answer the two questions a skill's author has:

- trigger evals (`evals/trigger_eval.json`, or `evals/eval_queries.json`): a list of
  `{"query" (or "prompt"), "should_trigger"}`, or `{"evals": [...]}` of them. Does the skill
  load when it should, and only then? Each query is a case of an eval whose job is that query
  as a goal, with the skill in a catalog; a run ends as soon as it has loaded the skill, or
  answered without it (`EvalSpec.until_triggered`), and a `trigger` check says whether that
  was right. Variants: models, disclosure modes, catalog sizes, description rewrites.
- `evals/evals.json`: `{"skill_name", "evals": [{"id", "prompt", "expected_output", "files",
  "expectations"}]}`. Does the job go better with the skill? Each case runs with the skill
  (`with_skill`) and without it (`without_skill`, the baseline), its files (named from the
  skill's folder, or from the evals file's when that lies outside it) copied into the run's
  workspace; each expectation is a judge check, told the expected output.

Both are ordinary eval specs, generated from the files as they are: the runner, the checks,
the summary, resuming, recording and replaying are the eval command's own.
"""

from __future__ import annotations

import hashlib
import random
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from ..errors import Problem
from ..jobs.loading import model_from_here
from ..jobs.problems import problems_from
from ..security.inputs import JsonInputError, load_json
from ..security.inventory import reads, reads_no_configuration
from ..skills import SkillCatalog
from ..skills.disclosure import Disclosure
from ..skills.discovery import project_skill_folders
from ..skills.skill_md import parse_yaml, skill_file_in, split_skill_text
from .loading import LoadedEval, load_eval
from .spec import EvalError, Scorer

EVALS_FILE = Path("evals") / "evals.json"
TRIGGER_FILES = (Path("evals") / "trigger_eval.json", Path("evals") / "eval_queries.json")
DEFAULT_TRIGGER_STEPS = 3
"""A trigger run's step cap: the question is answered early, the task need not be done."""
_LENIENT = ConfigDict(extra="allow")


class TriggerQuery(BaseModel):
    """One trigger eval: a user's request, and whether it should load the skill."""

    model_config = _LENIENT

    query: Annotated[str, Field(min_length=1)] | None = None
    prompt: Annotated[str, Field(min_length=1)] | None = None
    """skill-creator's second layout names the query `prompt`."""
    should_trigger: StrictBool

    @property
    def text(self) -> str:
        return self.query or self.prompt or ""


class SkillEvalCase(BaseModel):
    """One case of `evals/evals.json`."""

    model_config = _LENIENT

    id: StrictInt | Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
    prompt: Annotated[str, Field(min_length=1)]
    """The task, as a user would write it."""
    expected_output: str = ""
    """What success looks like, in words (given to the judge)."""
    files: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    """Input files, as paths from the skill's folder; copied into the run's workspace."""
    expectations: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    """Statements about the output, each checked by the judge."""
    assertions: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    """The agentskills.io guide's name for `expectations`; both count."""
    checks: list[Scorer] = Field(default_factory=list)
    """This project's checks of the case (docs/eval.md), beside the expectations."""


class SkillEvals(BaseModel):
    """`evals/evals.json`."""

    model_config = _LENIENT

    skill_name: str | None = None
    evals: Annotated[list[SkillEvalCase], Field(min_length=1)]


@dataclass
class EvalFiles:
    """A skill folder and the eval files found in it (or named)."""

    folder: Path
    skill: str
    evals: Path | None = None
    triggers: Path | None = None


def skill_name(folder: Path) -> str:
    """The name a skill folder's SKILL.md gives it; EvalError when it has none."""
    catalog = SkillCatalog([folder], include_builtin=False)
    if len(catalog.names) != 1:
        found = ", ".join(catalog.names) or "none"
        problem = Problem("folder", f"expected one skill folder (a SKILL.md), found: {found}")
        raise EvalError(folder, [problem])
    return catalog.names[0]


def skill_folders(path: Path) -> list[Path]:
    """`path` itself when it is a skill folder, else the skill folders inside it."""
    if skill_file_in(path) is not None:
        return [path.resolve()]
    catalog = SkillCatalog([path], include_builtin=False)
    return sorted({info.folder.resolve() for info in catalog})


def find_eval_files(
    folder: Path, *, evals: Path | None = None, triggers: Path | None = None
) -> EvalFiles:
    """The skill's eval files: `evals/evals.json` and the first trigger file there, unless
    `evals` or `triggers` names another."""
    found = EvalFiles(folder.resolve(), skill_name(folder))
    found.evals = evals or (folder / EVALS_FILE if (folder / EVALS_FILE).is_file() else None)
    found.triggers = triggers or next(
        (folder / name for name in TRIGGER_FILES if (folder / name).is_file()), None
    )
    return found


@reads("eval")
def _read(path: Path) -> Any:
    try:
        return load_json(path.read_bytes(), str(path))
    except OSError as exc:
        raise EvalError(path, [Problem("file", f"cannot read it: {exc.strerror}")]) from None
    except JsonInputError as exc:
        raise EvalError(path, [Problem("file", exc.problem)]) from None


def read_triggers(path: Path) -> list[TriggerQuery]:
    """A trigger eval file, in either layout; EvalError naming the file and each field."""
    data = _read(path)
    if isinstance(data, list):
        items, where = data, ""
    elif isinstance(data, dict) and isinstance(data.get("evals"), list):
        items, where = data["evals"], "evals"
    else:
        expected = 'a list of {"query", "should_trigger"}, or {"evals": [...]} of them'
        at = "evals" if isinstance(data, dict) else "file"
        raise EvalError(path, [Problem(at, f"expected {expected}")])
    problems: list[Problem] = []
    queries = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        try:
            query = TriggerQuery.model_validate(item)
        except ValidationError as error:
            for problem in problems_from(error, TriggerQuery):
                path_in = f"{at}.{problem.path}" if problem.path else at
                problems.append(Problem(path_in, problem.message))
            continue
        if (query.query is None) == (query.prompt is None):
            problems.append(Problem(at, "give the request as `query` or as `prompt` (one of them)"))
        queries.append(query)
    if not items:
        problems.append(Problem(where or "file", "no queries"))
    if problems:
        raise EvalError(path, problems)
    return queries


def read_evals(path: Path) -> SkillEvals:
    """An `evals.json`; EvalError naming the file and each field that is wrong."""
    data = _read(path)
    try:
        found = SkillEvals.model_validate(data)
    except ValidationError as error:
        raise EvalError(path, problems_from(error, SkillEvals)) from None
    ids = [str(case.id) for case in found.evals]
    problems = [
        Problem(f"evals[{i}].id", f"{case_id!r} names two cases")
        for i, case_id in enumerate(ids)
        if case_id in ids[:i]
    ]
    if problems:
        raise EvalError(path, problems)
    return found


def ignored_fields(path: Path) -> list[str]:
    """The fields of an eval file this project does not read (other tools' own), to say so."""
    data = _read(path)
    items = (
        data if isinstance(data, list) else (data.get("evals") if isinstance(data, dict) else None)
    )
    known = set(TriggerQuery.model_fields) | set(SkillEvalCase.model_fields)
    found: set[str] = set()
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            found |= {str(key) for key in item if key not in known}
    if isinstance(data, dict):
        found |= {str(key) for key in data if key not in {"skill_name", "evals"}}
    return sorted(found)


# --- The evals made of them ------------------------------------------------------------------

Catalog = Literal["all", "alone"] | int
"""Which skills a trigger run sees besides the skill: the user's (`all`), none (`alone`), or
that many distractors drawn from them."""


@dataclass
class SkillEvalOptions:
    """How to make a skill folder's evals (the command line's flags)."""

    out: Path
    """Where generated files go (a rewritten description's copy of the skill)."""
    models: Sequence[str] = ()
    """The models to compare (a variant each); none: the eval cannot run (say one)."""
    disclosures: Sequence[Disclosure] = ()
    catalog: Sequence[Path] | None = None
    """The skill folders the user has; None: the working folder's (as a job finds its own)."""
    catalogs: Sequence[Catalog] = ()
    """Catalog sizes to compare; none: `all`."""
    descriptions: Sequence[str] = ()
    """Description rewrites to try against the same queries, beside the description as
    written."""
    judge: str | None = None
    """The judge's model (default: the run's)."""
    steps: int = DEFAULT_TRIGGER_STEPS
    notes: list[str] = field(default_factory=list)
    """What the making says (a catalog too small for its distractors), to show the user."""

    def __post_init__(self) -> None:
        # As typed: a scripted model's file from the working folder, not the evals folder
        # the made eval is read from.
        self.models = [model_from_here(model) for model in self.models]
        if self.judge is not None:
            self.judge = model_from_here(self.judge)


@dataclass
class SkillEval:
    """An eval made of a skill's file."""

    kind: Literal["trigger", "evals"]
    loaded: LoadedEval
    files: EvalFiles


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:10]


def _skill_digest(folder: Path) -> str:
    """The skill's whole folder (every file's name and bytes): a changed `tools.py`, script
    or reference makes its earlier results stale, not only a changed SKILL.md."""
    if skill_file_in(folder) is None:
        return ""
    files = sorted(
        path
        for path in folder.rglob("*")
        if path.is_file() and not {"__pycache__", ".git"} & set(path.relative_to(folder).parts)
    )
    return _digest(
        *(f"{path.relative_to(folder).as_posix()}:{_file_digest(path)}" for path in files)
    )


@reads_no_configuration(
    "hashes a skill folder's files for an eval result's identity (what made it); decides "
    "nothing of a run"
)
def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:40] or "x"


def _catalog_folders(files: EvalFiles, options: SkillEvalOptions) -> list[Path]:
    given = options.catalog if options.catalog is not None else project_skill_folders(Path.cwd())
    return [Path(p).resolve() for p in given if Path(p).resolve() != files.folder]


def _removed_for(
    catalog: Catalog, skill: str, pool: list[str], options: SkillEvalOptions
) -> list[str]:
    if catalog == "all":
        return []
    if catalog == "alone":
        return pool
    chosen = random.Random(f"{skill}/{catalog}").sample(pool, min(catalog, len(pool)))
    if catalog > len(pool):
        options.notes.append(
            f"{catalog} distractors asked for, but the catalog has {len(pool)} other skills: "
            f"the run sees all {len(pool)}"
        )
    return [name for name in pool if name not in chosen]


@reads("eval")
def _described(files: EvalFiles, text: str, out: Path) -> Path:
    """A copy of the skill folder whose SKILL.md says `text` as its description."""
    digest = _digest(text, _skill_digest(files.folder))
    target = (out / "descriptions" / digest / files.folder.name).resolve()
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(files.folder, target, ignore=shutil.ignore_patterns("__pycache__", ".git"))
    skill_file = skill_file_in(target)
    assert skill_file is not None  # the copy of a folder with one
    frontmatter, body, _ = split_skill_text(skill_file.read_text(encoding="utf-8"))
    data, _ = parse_yaml(frontmatter or "")
    data["description"] = text
    head = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)
    skill_file.write_text(f"---\n{head}---\n\n{body}\n", encoding="utf-8")
    return target


def trigger_eval(files: EvalFiles, options: SkillEvalOptions) -> SkillEval:
    """The eval of the skill's trigger queries: one case a query, one variant a combination
    of the models, disclosure modes, catalog sizes and descriptions asked for."""
    if files.triggers is None:
        raise EvalError(files.folder, [Problem("triggers", "the skill has no trigger eval file")])
    queries = read_triggers(files.triggers)
    skill = files.skill
    folders = _catalog_folders(files, options)
    pool = sorted(n for n in SkillCatalog(folders).names if n != skill)
    descriptions: list[tuple[str, Path | None]] = [("as-written", None)]
    descriptions += [
        (f"description-{n}", _described(files, text, options.out))
        for n, text in enumerate(options.descriptions, 1)
    ]
    catalogs: list[Catalog] = list(options.catalogs) or ["all"]
    variants = []
    models: list[str | None] = [*options.models] or [None]
    disclosures: list[Disclosure | None] = [*options.disclosures] or [None]
    for model in models:
        for disclosure in disclosures:
            for catalog in catalogs:
                for described, copy in descriptions:
                    parts = [
                        _slug(model) if model and len(options.models) > 1 else "",
                        disclosure if disclosure and len(options.disclosures) > 1 else "",
                        _catalog_name(catalog) if len(catalogs) > 1 else "",
                        described if copy is not None or options.descriptions else "",
                    ]
                    variant: dict[str, Any] = {
                        "name": "-".join(p for p in parts if p) or (disclosure or "trigger"),
                        "skills_remove": _removed_for(catalog, skill, pool, options),
                    }
                    if model:
                        variant["model"] = model
                    if disclosure:
                        variant["disclosure"] = disclosure
                    if copy is not None:
                        variant["skills_add"] = [str(copy)]
                    variants.append(variant)
    cases = [
        {
            "id": f"q{n}",
            "inputs": {"query": query.text},
            "scorers": [{"trigger": {"skill": skill, "should_trigger": query.should_trigger}}],
        }
        for n, query in enumerate(queries, 1)
    ]
    spec = {
        "name": f"{skill}-trigger",
        "job": _job(files, options, f"trigger-{_skill_digest(files.folder)}", "query", folders)
        | {"budget": {"max_steps": options.steps}},
        "cases": cases,
        "variants": variants,
        "until_triggered": skill,
    }
    return SkillEval("trigger", _load(files.triggers, spec), files)


def _catalog_name(catalog: Catalog) -> str:
    return catalog if isinstance(catalog, str) else f"distractors-{catalog}"


def _job(
    files: EvalFiles, options: SkillEvalOptions, tag: str, field_name: str, folders: list[Path]
) -> dict[str, Any]:
    """A job of one goal, the case's `field_name` input, with the skill in the catalog. Its
    name carries the SKILL.md's digest, so a result made before the skill changed is made
    again (a result answers to its job)."""
    if not options.models:
        raise EvalError(files.folder, [Problem("model", "give the model to run it with (-m)")])
    workspace = (options.out / "empty-workspace").resolve()
    workspace.mkdir(parents=True, exist_ok=True)  # each run works in a copy of it
    return {
        "name": f"{files.skill}-{tag}",
        "model": options.models[0],
        "goal": f"{{inputs.{field_name}}}",
        "inputs": {field_name: "(each case gives its own)"},
        "skills": [str(files.folder), *map(str, folders)],
        "permissions": {"workspace": str(workspace)},
    }


def with_without_eval(files: EvalFiles, options: SkillEvalOptions) -> SkillEval:
    """The eval of the skill's `evals.json`: each case with the skill and without it."""
    if files.evals is None:
        raise EvalError(files.folder, [Problem("evals", f"the skill has no {EVALS_FILE}")])
    found = read_evals(files.evals)
    if len(options.models) > 1 or len(options.disclosures) > 1:
        problem = Problem("variants", "one model and one disclosure mode at a time")
        raise EvalError(files.evals, [problem])
    # A case's files are named from the skill's folder; from an evals file kept outside it
    # (a skill one cannot write into, a built-in one), from that file's own folder.
    evals_file = files.evals.resolve()
    root = files.folder if evals_file.is_relative_to(files.folder) else evals_file.parent
    problems = []
    cases = []
    for index, case in enumerate(found.evals):
        copies = {}
        for n, name in enumerate(case.files):
            source = (root / name).resolve()
            if not source.is_relative_to(root) or not source.is_file():
                where = (
                    f"outside {'the skill' if root == files.folder else 'the evals file'}'s folder"
                    if not source.is_relative_to(root)
                    else "not a file"
                )
                problems.append(Problem(f"evals[{index}].files[{n}]", f"{name}: {where}"))
            copies[name] = str(source)
        prompt = case.prompt
        if case.files:
            prompt += "\n\nInput files (in your workspace): " + ", ".join(case.files)
        scorers: list[dict[str, Any]] = []
        for n, text in enumerate([*case.expectations, *case.assertions], 1):
            rubric = text
            if case.expected_output:
                rubric += f"\n\n(What the eval expects of the whole output: {case.expected_output})"
            judge: dict[str, Any] = {"rubric": rubric}
            if options.judge:
                judge["model"] = options.judge
            shown = " ".join(text.split())
            scorers.append({"name": f"expectation {n}: {shown[:60]}", "judge": judge})
        scorers += [check.model_dump(exclude_none=True) for check in case.checks]
        cases.append(
            {"id": str(case.id), "inputs": {"prompt": prompt}, "copies": copies, "scorers": scorers}
        )
    if problems:
        raise EvalError(files.evals, problems)
    extra: dict[str, Any] = {}
    if options.models:
        extra["model"] = options.models[0]
    if options.disclosures:
        extra["disclosure"] = options.disclosures[0]
    spec = {
        "name": files.skill,
        "job": _job(
            files,
            options,
            f"evals-{_skill_digest(files.folder)}",
            "prompt",
            _catalog_folders(files, options),
        ),
        "cases": cases,
        "variants": [
            {"name": "with_skill", **extra},
            {"name": "without_skill", "skills_remove": [files.skill], **extra},
        ],
        "baseline": "without_skill",
    }
    loaded = replace(_load(files.evals, spec), skill=files.folder.resolve())
    return SkillEval("evals", loaded, files)


def _load(source: Path, spec: dict[str, Any]) -> LoadedEval:
    text = yaml.safe_dump(spec, sort_keys=False, allow_unicode=True)
    return load_eval(source, text=text)
