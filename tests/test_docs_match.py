"""The docs say what the code does: checks that catch the next drift between them."""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

import pytest

from orchestrator.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"
COMMANDS = (DOCS / "commands.md").read_text(encoding="utf-8")
AGENT_API = (DOCS / "agent-api.md").read_text(encoding="utf-8")


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command and command action (`trace show`), with its parser."""
    parser = build_parser(None)
    found: dict[str, argparse.ArgumentParser] = {}
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in sub.choices.items():
        actions = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        if actions:
            found.update({f"{name} {a}": p for a, p in actions[0].choices.items()})
        else:
            found[name] = command
    return found


def synopses() -> list[str]:
    """The first cell of each row of the command table (docs/commands.md)."""
    return re.findall(r"^\| `(orchestrator [^|]*(?:\\\|[^|]*)*)` \|", COMMANDS, re.MULTILINE)


def named(option: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


@pytest.mark.parametrize("command", sorted(commands()))
def test_the_command_table_names_every_flag(command: str) -> None:
    name, _, action = command.partition(" ")
    rows = [
        row
        for row in synopses()
        if row.split()[1] == name and (not action or re.search(rf"\b{action}\b", row))
    ]
    assert rows, f"docs/commands.md has no row for `orchestrator {command}`"
    text = " ".join(rows)
    missing = [
        "/".join(a.option_strings)
        for a in commands()[command]._actions
        if a.option_strings
        and "--help" not in a.option_strings
        and not any(
            re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text) for o in a.option_strings
        )
    ]
    assert not missing, f"`orchestrator {command}` in docs/commands.md lacks {missing}"


def test_the_development_page_lists_every_core_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [re.split(r"[<>=\[; ]", d, maxsplit=1)[0] for d in project["dependencies"]]
    page = (DOCS / "development.md").read_text(encoding="utf-8")
    (line,) = [ln for ln in page.split("\n\n") if "Core dependencies:" in ln]
    line = " ".join(line.split()).lower()
    missing = [n for n in names if n.lower() not in line]
    assert not missing, f"docs/development.md's core dependencies lack {missing}"
    extras = set(project["optional-dependencies"]) - {"dev"}
    named = set(re.findall(r"`(\w+)`", line.split("every other feature is an extra:")[1]))
    assert named == extras, (named, extras)


def test_the_unknown_field_examples_list_a_steps_fields() -> None:
    from orchestrator.jobs import Step

    text = (ROOT / "docs" / "job-spec.md").read_text(encoding="utf-8")
    examples = re.findall(r"unknown field 'depend_on'.*?expected one of: ([a-z_, ]+)", text)
    assert len(examples) == 2
    for fields in examples:
        assert fields.strip().split(", ") == list(Step.model_fields)


def test_one_default_for_max_steps_everywhere() -> None:
    import inspect

    from orchestrator import Agent, Orchestrator
    from orchestrator.agent import DEFAULT_MAX_STEPS, AgentLoop
    from orchestrator.jobs import Budget
    from orchestrator.models import ScriptedModel

    defaults = {
        "Orchestrator": inspect.signature(Orchestrator).parameters["max_steps"].default,
        "Agent": Agent(ScriptedModel({"*": []})).max_steps,
        "AgentLoop": inspect.signature(AgentLoop).parameters["max_steps"].default,
        "a job's budget": Budget().max_steps,
        "orchestrator ask": build_parser("ask").parse_args(["ask", "x"]).max_steps,
    }
    assert set(defaults.values()) == {DEFAULT_MAX_STEPS}, defaults
    assert f"max_steps={DEFAULT_MAX_STEPS}," in AGENT_API


def test_given_skill_folders_come_before_the_built_ins_as_the_docs_say(tmp_path: Path) -> None:
    from orchestrator import Orchestrator
    from orchestrator.models import ScriptedModel

    (tmp_path / "mine" / "notes").mkdir(parents=True)
    (tmp_path / "mine" / "notes" / "SKILL.md").write_text(
        "---\nname: notes\ndescription: Keep notes.\n---\nWrite notes.\n"
    )
    model = ScriptedModel({"*": []})
    both = Orchestrator(model, skills=[tmp_path / "mine"]).catalog.names
    alone = Orchestrator(model, skills=[tmp_path / "mine"], builtin=False).catalog.names
    assert "notes" in both and "files" in both
    assert alone == ["notes"]
    text = (ROOT / "docs" / "skills.md").read_text(encoding="utf-8")
    assert "search the folders they are given, then the built-in skills" in text


def test_every_flag_the_package_names_in_a_message_exists() -> None:
    flags = {
        option
        for parser in [build_parser(None), *commands().values()]
        for action in parser._actions
        for option in action.option_strings
    }
    # Flags of other programs, and the mistyped ones the parser's docs show as examples.
    others = {"--repository", "--interrupt", "--sett", "--mod"}
    others |= {  # bubblewrap's and a container engine's (security/sandbox.py)
        *("--ro-bind", "--ro-bind-try", "--bind", "--symlink", "--tmpfs", "--proc", "--dev"),
        *("--unshare-all", "--die-with-parent", "--new-session", "--chdir", "--remount-ro"),
        *("--rm", "--network", "--read-only", "--cap-drop", "--security-opt", "--memory"),
        "--pids-limit",
    }
    named: dict[str, set[str]] = {}
    for path in (ROOT / "orchestrator").rglob("*.py"):
        for flag in re.findall(r"[\"' (`]\s?(--[a-z][a-z-]+)", path.read_text(encoding="utf-8")):
            named.setdefault(flag, set()).add(path.relative_to(ROOT).as_posix())
    unknown = {flag: where for flag, where in named.items() if flag not in flags | others}
    assert not unknown, f"messages name flags no command has: {unknown}"


def test_the_embed_recipe_runs_as_the_agent_api_page_shows_it(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    folder = ROOT / "examples" / "embed"
    script = (folder / "embed.py").read_text(encoding="utf-8")
    skill = (folder / "skills" / "greeting" / "SKILL.md").read_text(encoding="utf-8")
    assert f"```python\n{script}```" in AGENT_API
    assert f"```markdown\n{skill}```" in AGENT_API

    shutil.copytree(folder, tmp_path / "embed")
    done = subprocess.run(
        [sys.executable, "embed.py"],
        cwd=tmp_path / "embed",
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Ada is on the pro plan; her welcome note is ready.",
        "welcome: Welcome aboard, Ada! Your pro plan is ready for you!",
    ]
    assert done.stderr == ""


def test_the_embed_recipes_sub_agent_really_loads_the_skill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runpy
    import shutil

    shutil.copytree(ROOT / "examples" / "embed", tmp_path / "embed")
    monkeypatch.chdir(tmp_path / "embed")
    result = runpy.run_path("embed.py")["result"]

    (welcome,) = result.children
    loaded = [m for m in welcome.run.messages if m.role == "tool" and m.name == "load_skill"]
    assert len(loaded) == 1 and not loaded[0].is_error
    assert "Never promise a discount." in (loaded[0].content or "")
    (plan,) = [m for m in result.messages if m.role == "tool" and m.name == "customer_plan"]
    assert plan.content == "pro"
    assert not result.refused_by_agent()


def test_the_docs_give_the_default_workspace_the_code_makes(tmp_path: Path) -> None:
    from orchestrator.jobs import load_job

    (tmp_path / "job.yaml").write_text("name: x\nmodel: scripted:script.yaml\ngoal: Hi.\n")
    (tmp_path / "script.yaml").write_text("goal: [{content: hi}]\n")
    assert load_job(tmp_path / "job.yaml").permissions.workspace == tmp_path / "work"
    for doc in [README, *(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))]:
        text = " ".join(doc.split())
        assert "default workspace is the spec's folder" not in text
        assert 'workspace=".", # root of the file tools (default: the current folder)' not in text


def test_the_tools_py_example_counts_words_of_text_not_of_bytes(tmp_path: Path) -> None:
    from types import SimpleNamespace

    text = (ROOT / "docs" / "skills.md").read_text(encoding="utf-8")
    section = text.split("## Tools in `tools.py`", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}
    exec(compile(example, "docs/skills.md", "exec"), namespace)  # noqa: S102 - our own docs
    (tmp_path / "notes.txt").write_text("déjà\u00a0vu here", encoding="utf-8")
    context = SimpleNamespace(permissions=SimpleNamespace(workspace_root=lambda: tmp_path))
    # `open_inside` gives bytes: counted as text, a no-break space separates words too.
    assert namespace["word_count"].fn("notes.txt", context) == 3  # type: ignore[attr-defined]


def _section(text: str, heading: str) -> str:
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_ways_to_run_are_one_table_in_the_readme_and_the_agent_api_page() -> None:
    table = _section(README, "## Ways to run").replace("(docs/commands.md)", "(commands.md)")
    assert table.strip() and table == _section(AGENT_API, "## Ways to run")


def test_the_local_model_recipe_is_the_same_in_the_readme_and_the_models_page() -> None:
    recipe = README.split("<!-- local-model-recipe -->\n", 1)[1].split("```", 2)[1]
    assert "--model-option context_window=8192" in recipe
    assert f"```{recipe}```" in (DOCS / "models.md").read_text(encoding="utf-8")


def test_the_readmes_links_lead_to_files_that_exist() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert "docs/commands.md" in links and "docs/development.md" in links
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert not missing, missing
    # Every page of the site is named, once it is in the site's navigation.
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = set(re.findall(r"^\s+- (?:[^:\n]+: )?([\w./-]+\.md)$", nav, re.MULTILINE))
    unnamed = sorted(
        page
        for page in pages
        if "/" not in page and page != "index.md" and f"docs/{page}" not in links
    )
    assert not unnamed, f"README names no link to {unnamed}"


@pytest.mark.slow  # collects the whole suite: seconds
def test_the_test_times_were_measured_on_a_suite_of_about_this_size() -> None:
    import subprocess
    import sys

    page = " ".join((DOCS / "development.md").read_text(encoding="utf-8").split())
    (measured,) = re.findall(r"Measured at ([\d,]+) tests", page)
    assert "grown a tenth past the count" in page
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (collected,) = re.findall(r"^(\d+) tests? collected", done.stdout, re.MULTILINE)
    # The suite's times in docs/development.md hold for the suite they were measured on: once
    # it has grown (or shrunk) by a tenth, they are to be measured again.
    assert abs(int(collected) / int(measured.replace(",", "")) - 1) <= 0.1, (collected, measured)
