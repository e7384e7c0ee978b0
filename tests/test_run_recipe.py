"""A run resolved once (`RunRecipe`, planner.py): what another process makes a run from.

The recipe crosses to a Ray worker by pickle (tests/test_ray.py runs it on a real Ray); here
it crosses to real subprocesses and back through pickle, and the orchestrator made from it is
run, to show what it carries and what it leaves behind.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from skill_factory import SHOUT_TOOLS as TOOLS
from trace_lines import trace_lines

from orchestrator import Orchestrator
from orchestrator.jobs import load_job
from orchestrator.ray import WorkerRecipe
from orchestrator.skills import SkillCatalog
from orchestrator.skills.skill import SkillError


def make_skill(root: Path, name: str, tools: str | None = TOOLS) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Says things loudly.\n---\nUse shout.\n"
    )
    if tools is not None:
        (folder / "tools.py").write_text(tools)
    return folder


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def test_a_catalog_crosses_as_what_its_scan_found_never_as_imported_code(
    tmp_path: Path,
) -> None:
    make_skill(tmp_path / "skills", "loud")
    catalog = SkillCatalog([tmp_path / "skills"], include_builtin=False)
    loaded = catalog.load("loud")  # its code imported here, its module named for this process
    assert [t.name for t in loaded.tools] == ["loud__shout"]
    (tmp_path / "catalog.pickle").write_bytes(pickle.dumps(catalog))

    # Another process has no module of this one's: only what the scan found could cross.
    there = subprocess.run(
        [
            sys.executable,
            "-c",
            "import asyncio, pickle, sys\n"
            "from orchestrator import ToolContext\n"
            "catalog = pickle.loads(open(sys.argv[1], 'rb').read())\n"
            "shout = catalog.load('loud').tools[0]\n"
            'print(asyncio.run(shout.invoke(shout.parse_arguments(\'{"text": "hi"}\'),'
            " ToolContext(agent='w'))))\n"
            "print(catalog.names)\n",
            str(tmp_path / "catalog.pickle"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert there.returncode == 0, there.stderr
    assert there.stdout.split("\n")[:2] == ["HI!", "['loud']"]


def test_code_changed_after_the_scan_is_not_imported_where_the_catalog_arrives(
    tmp_path: Path,
) -> None:
    folder = make_skill(tmp_path / "skills", "loud")
    catalog = SkillCatalog([tmp_path / "skills"], include_builtin=False)
    catalog.load("loud")
    sent = pickle.dumps(catalog)
    marker = tmp_path / "pwned"
    (folder / "tools.py").write_text(TOOLS + f"\nopen({str(marker)!r}, 'w').close()\n")

    arrived = pickle.loads(sent)
    with pytest.raises(SkillError, match="changed after the skill catalog was scanned"):
        arrived.load("loud")
    assert not marker.exists()
    # The catalog it was sent from keeps the code it imported before.
    assert catalog.load("loud").tools[0].name == "loud__shout"


JOB = """\
name: resolved
model: scripted:script.yaml
skills: [skills]
steps:
  - {id: speak, task: Say hi loudly., skills: [loud]}
"""


def test_an_orchestrator_made_from_the_recipe_is_the_one_resolved_not_the_folders_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_skill(tmp_path / "skills", "loud")
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / ".env").write_text("FROM_DOTENV=dotenv-value\n")
    monkeypatch.setenv("DRIVER_ONLY_KEY", "driver-only-value")
    script = {"speak": [call("loud__shout", text="hi"), {"content": "said HI!"}]}
    (tmp_path / "script.yaml").write_text(json.dumps(script))
    job = load_job(tmp_path / "job.yaml")
    driver = Orchestrator.from_job(job, approve=lambda request: True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        driver.recipe.max_steps = 1  # type: ignore[misc]

    # After the run was resolved the folders change: a skill appears, the spec on disk
    # breaks. What was resolved is what another process runs.
    make_skill(tmp_path / "skills", "late")
    (tmp_path / "job.yaml").write_text("name: broken\nsteps: [oops]\n")
    sent = pickle.dumps(WorkerRecipe.of(driver, job, None))
    # The process's variables are read where the orchestrator is made, never carried.
    assert b"driver-only-value" not in sent
    worker = pickle.loads(sent).orchestrator()
    assert worker.environ["FROM_DOTENV"] == driver.environ["FROM_DOTENV"] == "dotenv-value"

    assert worker.catalog.names == driver.catalog.names
    assert "loud" in worker.catalog and "late" not in worker.catalog
    assert worker.job is not None and worker.job.name == "resolved"
    assert worker.permissions == driver.permissions
    assert tmp_path / "job.yaml" in worker.permissions.read_only
    assert worker.approve is None  # a person answers on the driver only
    result = worker.run_job_sync(trace=tmp_path / "worker.jsonl")
    assert result.status == "completed"
    assert result.output == "said HI!"
    observed = [
        e["message"]["content"]
        for e in trace_lines(tmp_path / "worker.jsonl")
        if e["type"] == "message" and e["message"]["role"] == "tool"
    ]
    assert observed == ["HI!"]


def test_an_orchestrator_s_own_arguments_resolve_into_the_same_recipe(tmp_path: Path) -> None:
    make_skill(tmp_path / "skills", "loud")
    (tmp_path / "script.yaml").write_text("{}")
    direct = Orchestrator(
        f"scripted:{tmp_path / 'script.yaml'}",
        skills=[tmp_path / "skills"],
        builtin=False,
        max_tokens=5_000,
        max_parallel=3,
        permissions={"workspace": str(tmp_path / "work")},
        environ={"ONLY": "this"},
    )
    recipe = direct.recipe
    assert recipe.catalog is direct.catalog and recipe.catalog.names == ["loud"]
    assert (recipe.max_tokens, recipe.max_parallel) == (5_000, 3)
    assert recipe.environ == {"ONLY": "this"}
    assert (tmp_path / "skills").resolve() in {p.resolve() for p in recipe.permissions.read_only}
    made = Orchestrator.made_from(pickle.loads(pickle.dumps(recipe)))
    assert made.catalog.names == ["loud"]
    assert made.fork.settings.max_parallel == 3
    assert made.new_budget().max_tokens == 5_000


class Mine(Orchestrator):
    """An orchestrator of one's own: its choices hold where a worker makes the run."""

    def resolve(self, model: Any) -> Any:
        return self.model


JOB_SETTINGS = """\
name: settled
model: fast
models:
  fast: {name: "scripted:script.yaml", context_window: 9000}
prices:
  scripted: {input: 1.5, output: 2.5}
budget: {max_tokens: 7000, max_cost_usd: 3, max_steps: 7, max_parallel: 2}
disclosure: eager
fail_on_skill_error: true
compaction: summarize
on_input: deny
mcp_servers:
  clock: {command: python, args: [clock.py]}
agents:
  far: {a2a: "http://127.0.0.1:9/", description: A remote agent., token_env: FAR_TOKEN}
steps:
  - {id: one, task: Go.}
"""


def test_what_a_job_sets_arrives_where_the_run_is_made_again(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(JOB_SETTINGS)
    (tmp_path / "script.yaml").write_text("{}")
    (tmp_path / ".env").write_text("FROM_DOTENV=dotenv-value\n")
    job = load_job(tmp_path / "job.yaml")
    driver = Mine.from_job(job, environ={"GIVEN": "yes"})
    # A goal run (no job handed to the workers) still runs with the job's recipe.
    worker = pickle.loads(pickle.dumps(WorkerRecipe.of(driver, None, None))).orchestrator()

    assert type(worker) is Mine
    assert worker.environ == {"GIVEN": "yes"}
    assert worker.model.name == driver.model.name
    assert worker.aliases.table["fast"].context_window == 9000
    price = worker.prices.get("scripted")
    assert price is not None and (price.input, price.output) == (1.5, 2.5)
    assert (worker.max_tokens, worker.max_cost, worker.max_steps) == (7000, 3, 7)
    assert worker.fork.settings.max_parallel == 2
    assert (worker.disclosure, worker.fail_on_skill_error) == ("eager", True)
    assert worker.fork.settings.compaction == "summarize"
    assert worker.on_input == "deny"
    assert "clock" in worker.catalog and worker.catalog.has_servers
    far = worker.subagents.get("far")
    assert far is not None and far.remote is not None and far.remote.token_env == "FAR_TOKEN"
    assert worker.permissions == driver.permissions


def test_without_environ_a_goal_run_made_again_reads_the_job_s_env_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "job.yaml").write_text(JOB_SETTINGS)
    (tmp_path / "script.yaml").write_text("{}")
    (tmp_path / ".env").write_text("FROM_DOTENV=dotenv-value\n")
    driver = Orchestrator.from_job(load_job(tmp_path / "job.yaml"))
    sent = pickle.dumps(WorkerRecipe.of(driver, None, None))
    monkeypatch.setenv("WORKER_ONLY", "here")  # the process that makes it again
    worker = pickle.loads(sent).orchestrator()
    assert worker.environ["FROM_DOTENV"] == "dotenv-value"
    assert worker.environ["WORKER_ONLY"] == "here"


def test_the_package_s_own_skills_are_found_where_the_receiving_process_installed_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from orchestrator.skills import catalog as catalog_module
    from orchestrator.skills.discovery import builtin_skills_folder

    installed = builtin_skills_folder()
    assert installed is not None
    elsewhere = tmp_path / "other-install" / "skills"
    shutil.copytree(installed, elsewhere)
    # The sending process had the package installed elsewhere.
    monkeypatch.setattr(catalog_module, "builtin_skills_folder", lambda: elsewhere)
    sent = pickle.dumps(SkillCatalog([]))
    monkeypatch.undo()
    shutil.rmtree(tmp_path / "other-install")

    arrived = pickle.loads(sent)
    files = arrived.get("files")
    assert files is not None and files.folder.is_relative_to(installed)
    assert arrived.load("files").tools  # its code, from this install, checked as scanned


def test_a_job_s_model_is_resolved_as_its_run_resolves_it_without_a_run(tmp_path: Path) -> None:
    from orchestrator.errors import ConfigError
    from orchestrator.models import price_of

    (tmp_path / "job.yaml").write_text(JOB_SETTINGS)
    (tmp_path / "script.yaml").write_text("{}")
    job = load_job(tmp_path / "job.yaml")
    alone = job.resolve_model()
    in_a_run = Orchestrator.from_job(job).model
    assert alone.name == in_a_run.name
    assert price_of(alone) == price_of(in_a_run) and price_of(alone) is not None
    assert alone.options.context_window == in_a_run.options.context_window == 9000

    unpriced = JOB_SETTINGS.replace(
        "  scripted: {input: 1.5, output: 2.5}\n", "  other: {input: 1, output: 1}\n"
    )
    (tmp_path / "job.yaml").write_text(unpriced)
    with pytest.raises(ConfigError, match="has no price"):
        load_job(tmp_path / "job.yaml").resolve_model()
