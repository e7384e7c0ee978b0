"""`orchestrator schema job|eval`: JSON Schemas of the spec files as users write them.

Every example job spec and eval file, and every file `orchestrator init` writes, holds to
them; each shorthand the loader expands is allowed where it stands (and the loader takes the
same file); an unknown field is refused, with its path, by both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_process import orchestrator

from orchestrator.cli.init import TEMPLATES
from orchestrator.eval import EvalError, EvalSpec, load_eval
from orchestrator.jobs import SpecError, load_job
from orchestrator.security.inputs import load_yaml

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def printed_schema(kind: str, tmp_path: Path) -> dict[str, Any]:
    done = orchestrator("schema", kind, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    schema: dict[str, Any] = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("schemas")
    return {kind: printed_schema(kind, folder) for kind in ("job", "eval")}


def as_an_editor_reads(path: Path) -> Any:
    """The file's YAML as JSON values (a date is the text it shows, as an editor reads it)."""
    data = load_yaml(path.read_text(encoding="utf-8"), str(path))
    return json.loads(json.dumps(data, default=str))


def problems(schema: dict[str, Any], data: Any) -> list[tuple[str, str]]:
    """Each place `data` breaks `schema`: its path (`steps.0`) and the message, as an editor
    shows it (where a value may take one of several shapes, the shape it comes closest to)."""
    errors = jsonschema.Draft202012Validator(schema).iter_errors(data)
    closest = [jsonschema.exceptions.best_match([error]) for error in errors]
    return sorted((".".join(map(str, e.absolute_path)), e.message) for e in closest)


def example_files() -> list[tuple[str, Path]]:
    """Every YAML file under examples/ but the scripted models' scripts, and its kind."""
    found = []
    for path in sorted(EXAMPLES.rglob("*.y*ml")):
        if path.name.endswith((".script.yaml", ".script.yml")):
            continue
        found.append(("eval" if path.name.endswith((".eval.yaml", ".eval.yml")) else "job", path))
    return found


def test_the_examples_are_found() -> None:
    kinds = [kind for kind, _ in example_files()]
    assert kinds.count("job") >= 4 and kinds.count("eval") >= 2


@pytest.mark.parametrize(
    ("kind", "path"),
    example_files(),
    ids=[str(p.relative_to(EXAMPLES)) for _, p in example_files()],
)
def test_every_example_holds_to_its_schema(
    kind: str, path: Path, schemas: dict[str, dict[str, Any]]
) -> None:
    assert problems(schemas[kind], as_an_editor_reads(path)) == []


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_what_init_writes_holds_to_the_schemas_it_writes_beside(
    template: str, tmp_path: Path, schemas: dict[str, dict[str, Any]]
) -> None:
    made = orchestrator("init", "job", "--template", template, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "job"
    for kind, spec in (("job", "job.yaml"), ("eval", "job.eval.yaml")):
        written = json.loads((folder / f"{kind}.schema.json").read_text(encoding="utf-8"))
        assert written == schemas[kind]
        first = (folder / spec).read_text(encoding="utf-8").splitlines()[0]
        assert first == f"# yaml-language-server: $schema={kind}.schema.json"
        assert problems(written, as_an_editor_reads(folder / spec)) == []
    # The loaders read the specs, first line and all.
    assert load_job(folder / "job.yaml").name == "job"
    assert load_eval(folder / "job.eval.yaml").spec.name == "job"


SHORTHANDS = """\
name: shorthands
model: scripted:script.yaml          # a model's name alone, where its settings may stand
models:
  fast: scripted:script.yaml
  roomy: {name: scripted:script.yaml, context_window: 8000}
executor: local                      # `{type: local}`
skills: [vendor, {path: vendor, preapprove: false}]
pinned: [notes.md, {note: Keep it short.}]
inputs: {count: 3, strict: true, ratio: 0.5, when: 2026-01-02, region: null}
mcp_servers:
  clock: {command: clock-server, startTimeout: 5}
  calendar: {command: calendar-server, start_timeout: 5}
steps:
  - id: a
    task: "Count {inputs.count} in {inputs.region}."
    model: inherit
  - id: b
    task: "Check {steps.a.output}."
    depends_on: [a]
    model: fast
    pinned: [notes.md]
"""


def shorthand_job(folder: Path) -> Path:
    (folder / "vendor").mkdir()
    (folder / "notes.md").write_text("notes\n")
    (folder / "script.yaml").write_text("a: [{content: hi}]\nb: [{content: ok}]\n")
    spec = folder / "job.yaml"
    spec.write_text(SHORTHANDS)
    return spec


def test_each_shorthand_the_loader_takes_the_schema_takes(
    tmp_path: Path, schemas: dict[str, dict[str, Any]]
) -> None:
    spec = shorthand_job(tmp_path)
    job = load_job(spec, inputs={"region": "APAC"})
    assert job.executor.type == "local" and job.pinned[0].file == tmp_path / "notes.md"
    assert job.mcp_servers["calendar"].start_timeout == 5

    assert problems(schemas["job"], as_an_editor_reads(spec)) == []


def test_an_eval_may_write_its_job_inline_and_the_job_schema_holds_it(
    tmp_path: Path, schemas: dict[str, dict[str, Any]]
) -> None:
    shorthand_job(tmp_path)
    job = load_yaml(SHORTHANDS, "job")
    evals = {"name": "inline", "job": job, "cases": [{"inputs": {"region": 7}}]}
    assert problems(schemas["eval"], json.loads(json.dumps(evals, default=str))) == []
    assert problems(schemas["eval"], {**evals, "job": "job.yaml"}) == []

    typo = {**evals, "job": {**job, "stepz": []}, "cases": "cases.csv"}
    found = problems(schemas["eval"], json.loads(json.dumps(typo, default=str)))
    assert found and all(path == "job" for path, _ in found)
    described = schemas["eval"]["properties"]["job"]["description"]
    assert described == EvalSpec.model_fields["job"].description


@pytest.mark.parametrize(
    ("field", "path", "loader_path"),
    [
        ({"budgett": {}}, "", "budgett"),
        ({"budget": {"max_token": 9}}, "budget", "budget.max_token"),
        ({"steps": [{"id": "a", "task": "x", "depend_on": []}]}, "steps.0", "steps[0].depend_on"),
        ({"model": {"name": "scripted:script.yaml", "api_key": "sk-1"}}, "model", "model.api_key"),
        ({"executor": {"type": "ray", "adress": "auto"}}, "executor", "executor.adress"),
        ({"inputs": {"not a name": "x"}}, "inputs", "inputs"),
    ],
)
def test_an_unknown_field_is_refused_by_the_schema_as_by_the_loader(
    field: dict[str, Any],
    path: str,
    loader_path: str,
    tmp_path: Path,
    schemas: dict[str, dict[str, Any]],
) -> None:
    (tmp_path / "script.yaml").write_text("goal: [{content: hi}]\n")
    spec = {"name": "typo", "model": "scripted:script.yaml", "goal": "Say hi.", **field}
    if "steps" in field:
        del spec["goal"]

    found = problems(schemas["job"], spec)

    assert [p for p, _ in found] == [path], found
    unknown = loader_path.rpartition(".")[2].partition("[")[0]
    if unknown not in ("api_key", "inputs"):  # a key refused as such; a name, by its pattern
        assert f"'{unknown}' was unexpected" in found[0][1]
    (tmp_path / "job.yaml").write_text(json.dumps(spec))
    with pytest.raises(SpecError) as refused:
        load_job(tmp_path / "job.yaml")
    assert [p.path for p in refused.value.problems] == [loader_path]


def test_an_eval_with_an_unknown_field_is_refused(
    tmp_path: Path, schemas: dict[str, dict[str, Any]]
) -> None:
    evals = {
        "name": "typo",
        "job": "job.yaml",
        "cases": [{"id": "one", "expectd": {"words": 3}}],
        "scorers": [{"contains": "x", "weight": 2}],
    }
    found = problems(schemas["eval"], evals)
    assert [p for p, _ in found] == ["cases.0", "scorers.0"]
    assert "'expectd' was unexpected" in found[0][1]
    assert "'weight' was unexpected" in found[1][1]
    (tmp_path / "typo.eval.yaml").write_text(json.dumps(evals))
    with pytest.raises(EvalError):
        load_eval(tmp_path / "typo.eval.yaml")


def test_the_schema_carries_the_fields_documentation(schemas: dict[str, dict[str, Any]]) -> None:
    budget = schemas["job"]["$defs"]["Budget"]["properties"]["max_parallel"]
    assert budget["default"] == 4 and "agents may work at once" in budget["description"]
    assert schemas["job"]["additionalProperties"] is False
    assert schemas["eval"]["additionalProperties"] is False
    assert schemas["job"]["title"] == "orchestrator job spec"
