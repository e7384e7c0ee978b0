"""The documentation site: `mkdocs build --strict` passes, offline, and its reference pages
cover the code (every command and flag, every field of the spec files, every public name).

The build runs as a real process with every connection past 127.0.0.1 refused, so a plugin or
theme that fetched something at build time would fail it. A second build, of a copy whose page
links to a missing page and a missing section, shows that strict mode refuses what it should.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import orchestrator
from orchestrator.cli import COMMANDS, build_parser
from orchestrator.eval import eval_schema
from orchestrator.jobs import job_schema

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SITE_PACKAGES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
NO_NETWORK = """\
from orchestrator.testing import block_outside_connections

block_outside_connections("mkdocs build")
"""


def hook(name: str) -> ModuleType:
    """One of the site's MkDocs hooks (docs/hooks/NAME.py), imported."""
    spec = importlib.util.spec_from_file_location(name, DOCS / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(config: Path, site: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of `config` into `site`, as a process that may reach nothing
    past 127.0.0.1."""
    missing = [name for name in SITE_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(
            f"the site's tools are not installed ({', '.join(missing)}): pip install -e '.[docs]'"
        )
    guard = tmp_path / "guard"
    guard.mkdir(exist_ok=True)
    (guard / "sitecustomize.py").write_text(NO_NETWORK)
    path = os.pathsep.join([str(guard), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict"]
        + ["--config-file", str(config), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=config.parent,
        env={**os.environ, "PYTHONPATH": path, "NO_MKDOCS_2_WARNING": "1"},
    )


def page_text(site: Path, page: str) -> str:
    """The words of a built page's article, its markup left out."""
    html = (site / page / "index.html").read_text(encoding="utf-8")
    article = html[html.index("<article") : html.index("</article>")]
    return re.sub(r"<[^>]+>", " ", article)


@pytest.mark.slow
def test_the_site_builds_strict_offline_with_its_reference_pages(tmp_path: Path) -> None:
    site = tmp_path / "site"

    done = build(ROOT / "mkdocs.yml", site, tmp_path)

    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    cli = page_text(site, "reference/cli")
    assert all(f"orchestrator {command.name}" in cli for command in COMMANDS)
    assert "--template" in cli and "orchestrator schema" in cli
    fields = page_text(site, "reference/job-spec-fields")
    assert "depends_on" in fields and "max_parallel" in fields
    assert "run_sync" in page_text(site, "reference/api/agents")
    assert "editors-orchestrator-schema" in (site / "job-spec" / "index.html").read_text()


@pytest.mark.slow
def test_strict_mode_refuses_a_broken_link_and_a_missing_section(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(DOCS, copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    index = copy / "docs" / "index.md"
    index.write_text(
        index.read_text() + "\nSee [the plan](plans.md) and [the limits](job-spec.md#no-limits).\n"
    )

    done = build(copy / "mkdocs.yml", tmp_path / "site", tmp_path)

    assert done.returncode == 1
    assert "'plans.md'" in done.stderr and "'#no-limits'" in done.stderr


def test_every_public_name_has_its_reference_entry() -> None:
    documented = set()
    for page in (DOCS / "reference" / "api").glob("*.md"):
        documented |= set(re.findall(r"^::: orchestrator\.(\w+)$", page.read_text(), re.M))
    missing = sorted(set(orchestrator.__all__) - documented)
    assert not missing, f"no `::: orchestrator.NAME` in docs/reference/api/ for {missing}"


def test_the_cli_reference_names_every_command_action_and_flag() -> None:
    text = hook("cli_reference").cli_reference()
    parser = build_parser()
    for name, command in _subcommands(parser).items():
        actions = _subcommands(command)
        for title, sub in [(name, command), *((f"{name} {a}", p) for a, p in actions.items())]:
            assert f"`orchestrator {title}`" in text
            section = text.split(f"`orchestrator {title}`\n", 1)[1].split("\n## ", 1)[0]
            for action in sub._actions:
                for option in action.option_strings:
                    if option not in ("-h", "--help"):
                        assert f"`{option}" in section, f"orchestrator {title}: {option}"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@pytest.mark.parametrize(
    ("kind", "page", "schema"),
    [
        ("job", "reference/job-spec-fields.md", job_schema()),
        ("eval", "reference/eval-fields.md", eval_schema()),
    ],
)
def test_the_field_reference_has_every_field_of_every_part(
    kind: str, page: str, schema: dict[str, Any]
) -> None:
    spec_page = hook("spec_reference").SpecPage(kind, page)
    text = spec_page.render()
    parts = {"": schema} | {
        name: body for name, body in schema["$defs"].items() if name not in spec_page.elsewhere
    }
    for name, body in parts.items():
        heading = "## Top level" if not name else f"{{#{name.lower()}}}"
        assert heading in text, name
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        objects = [body, *body.get("anyOf", [])]
        fields = [f for o in objects for f in o.get("properties", {})]
        assert fields, name
        assert all(f"| `{field}` |" in section for field in fields), name
