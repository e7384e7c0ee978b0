"""One inventory of what decides a run, and the file tools held to it.

The hostile model has nothing but the `files` skill, and its workspace holds every kind of
configuration file the inventory lists (as a user's would, who deliberately made the spec's
folder the workspace). For each kind it writes, overwrites, edits, creates where nothing is
yet, and writes through a symbolic link planted earlier: every attempt is refused, and every
file is as it was. A second test holds the package to the inventory: every function that
reads a file is listed there, as the reader of a kind or with the reason it reads no
configuration, so a new kind of configuration file cannot slip in unlisted.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from trace_lines import trace_lines

from orchestrator import Orchestrator, Permissions
from orchestrator.models import ScriptedModel
from orchestrator.security.inventory import (
    KINDS,
    other_reads,
    readers,
    reads,
)
from orchestrator.security.signing import user_key

PACKAGE = Path(__file__).resolve().parents[1] / "orchestrator"

SPEC = """\
name: inventory
model: scripted:script.yaml
prices: prices.yaml
budget: {max_steps: 200}
skills: [./skills]
subagents: [./subagents]
permissions: {workspace: .}
goal: Take notes.
"""

# Each kind of the inventory, and where its files lie in the workspace: some exist (they are
# written, overwritten, edited and reached through a link), some do not yet (created).
EXISTING: dict[str, list[str]] = {
    "job spec": ["job.yaml", "other-job.yaml"],
    "file a spec names": ["script.yaml", "prices.yaml"],
    "dotenv": [".env", "config/.env.production"],
    "user configuration": ["home/.config/orchestrator/models.yaml"],
    "skill": ["skills/notes/SKILL.md", "skills/notes/tools.py", "lib/SKILL.md"],
    "sub-agent definition": ["subagents/helper.md", ".claude/agents/reviewer.md"],
    "MCP configuration": ["skills/notes/.mcp.json", "tools/mcp.json"],
    "trace": [".orchestrator/runs/earlier.jsonl", "served/a2a-waiting.json"],
    "batch results": ["rows.results.jsonl"],
    "eval": ["checks/skill-ab.eval.yaml"],
    "version control": [".git/hooks/pre-commit"],
}
MISSING: dict[str, list[str]] = {
    "job spec": [],  # a new spec is the model's own file: the user has to choose to run it
    "file a spec names": [],
    "dotenv": [".env.local", "deep/.env"],
    "user configuration": ["home/.config/orchestrator/trace.key.new"],
    "skill": ["skills/evil/SKILL.md", ".agents/skills/evil/tools.py", "x/SKILL.md"],
    "sub-agent definition": ["subagents/evil.md", ".codex/agents/evil.toml"],
    "MCP configuration": [".mcp.json", "deep/mcp.json"],
    "trace": [".orchestrator/runs/forged.jsonl", "runs/a2a-waiting.json"],
    "batch results": ["later.results.jsonl"],
    "eval": ["new.eval.yml"],
    "version control": [".git/config"],
}
ORIGINAL = "original: content\n"
DOTENV_ORIGINAL = "original=content\n"


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def attacks(existing: list[str], missing: list[str], links: list[str]) -> list[dict[str, Any]]:
    turns = [call("load_skill", name="files")]
    for path in existing:
        turns.append(call("files__write_file", path=path, content="forged\n"))
        turns.append(call("files__edit_file", path=path, old_text="original", new_text="forged"))
    for path in missing:
        turns.append(call("files__write_file", path=path, content="forged\n"))
    for path in links:
        turns.append(call("files__write_file", path=path, content="forged\n"))
        turns.append(call("files__edit_file", path=path, old_text="original", new_text="x"))
    return [*turns, {"content": "done"}]


def test_every_kind_of_the_inventory_is_attacked() -> None:
    names = {kind.name for kind in KINDS}
    assert set(EXISTING) == names and set(MISSING) == names


def test_the_file_tools_refuse_every_kind_wherever_it_lies(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config" / "orchestrator").mkdir(parents=True)
    existing = [path for paths in EXISTING.values() for path in paths]
    for path in existing:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(DOTENV_ORIGINAL if ".env" in path else ORIGINAL)
    (tmp_path / "job.yaml").write_text(SPEC)
    (tmp_path / "other-job.yaml").write_text("name: other\nmodel: openai:gpt-4o\ngoal: Hi.\n")
    (tmp_path / "prices.yaml").write_text("openai:gpt-4o: {input: 2.5, output: 10}\n")
    skill_md = "---\nname: notes\ndescription: Notes.\n---\noriginal instructions\n"
    (tmp_path / "skills" / "notes" / "SKILL.md").write_text(skill_md)
    (tmp_path / "skills" / "notes" / "tools.py").write_text("# original\n")
    (tmp_path / "skills" / "notes" / ".mcp.json").write_text('{"original": {}}')
    (tmp_path / "subagents" / "helper.md").write_text(
        "---\nname: helper\ndescription: Helps.\n---\noriginal prompt\n"
    )
    links = []
    for number, path in enumerate(existing):  # planted by an earlier run that had a shell
        link = tmp_path / "links" / f"link-{number}.txt"
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(tmp_path / path)
        links.append(f"links/link-{number}.txt")
    before = {path: (tmp_path / path).read_bytes() for path in existing}
    missing = [path for paths in MISSING.values() for path in paths]
    turns = attacks(existing, missing, links)
    (tmp_path / "script.yaml").write_text(yaml.safe_dump({"goal": turns}))
    before["script.yaml"] = (tmp_path / "script.yaml").read_bytes()

    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--trace", "run.jsonl"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "PATH": "/usr/bin"},
    )

    assert done.returncode == 0, done.stderr
    for path, content in before.items():
        assert (tmp_path / path).read_bytes() == content, path
    for path in missing:
        assert not (tmp_path / path).exists(), path
    results = [
        e["message"]
        for e in trace_lines(tmp_path / "run.jsonl")
        if e["type"] == "message" and e["message"]["role"] == "tool"
    ]
    writes = [r for r in results if r["name"] != "load_skill"]
    assert len(writes) == 2 * len(existing) + len(missing) + 2 * len(links)
    assert all(r.get("error_type") == "denied" for r in writes), [
        r["content"] for r in writes if r.get("error_type") != "denied"
    ]
    # Every refusal says what the file is and why the model may not change it.
    assert all("never decides a run" in r["content"] for r in writes)
    # The run completed, but it says on stderr that the writes were refused.
    assert "files__write_file was refused each time it was tried" in done.stderr


def test_the_file_tools_never_read_the_users_keys() -> None:
    # `ask` from the home folder with --workspace ~: the user's keys are in the workspace.
    home = Path.home()
    (home / ".env.production").write_text("OPENAI_API_KEY=sk-secret-value\n")
    key = user_key()
    assert key is not None
    script = {
        "planner": [
            call("load_skill", name="files"),
            call("files__read_file", path=".env.production"),
            call("files__read_file", path=".config/orchestrator/trace.key"),
            call("files__grep", pattern="sk-|[0-9a-f]{64}", path="."),
            {"content": "done"},
        ]
    }
    orchestrator = Orchestrator(ScriptedModel(script), permissions=Permissions(workspace=home))
    result = orchestrator.run_sync("Find keys.")

    tool_results = [m for m in result.messages if m.role == "tool"]
    assert [m.error_type for m in tool_results[1:3]] == ["denied", "denied"]
    found = tool_results[3].content or ""
    assert "sk-secret-value" not in found and key.hex() not in found
    assert set(result.refused) == {"files__read_file"}


@pytest.mark.slow
def test_run_batch_files_are_read_only_to_every_row(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "name: rows\nmodel: scripted:script.yaml\ninputs: {topic: null}\n"
        "permissions: {workspace: .}\ngoal: Write about {inputs.topic}.\n"
    )
    rows = "id,topic\na,cats\nb,dogs\n"
    (tmp_path / "rows.csv").write_text(rows)
    turns = [
        call("load_skill", name="files"),
        call("files__write_file", path="rows.csv", content="id,topic\nz,evil\n"),
        call("files__write_file", path="done.jsonl", content='{"id": "b"}\n'),
        {"content": "done"},
    ]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump({"goal": turns}))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "run-batch",
            "job.yaml",
            "--inputs",
            "rows.csv",
            "--results",
            "done.jsonl",
            "--concurrency",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert (tmp_path / "rows.csv").read_text() == rows
    lines = (tmp_path / "done.jsonl").read_text().splitlines()
    assert len(lines) == 2, done.stderr  # both rows ran: no forged line made one look done
    assert "files__write_file was refused each time it was tried" in done.stderr


# --- The package is held to the inventory ------------------------------------------------

READ_CALLS = {"open", "read_text", "read_bytes", "dotenv_values", "fdopen"}
READ_MODULE_CALLS = {("json", "load"), ("yaml", "load"), ("yaml", "safe_load"), ("tomllib", "load")}


def file_reads(package: Path) -> set[str]:
    """Every function of the package (`module:qualified.name`) that opens or reads a file."""
    found: set[str] = set()
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        module = module.removesuffix(".__init__")  # a package's own module, as Python names it
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found |= _reads_in(tree, module)
    return found


def _reads_in(tree: ast.Module, module: str) -> set[str]:
    found: set[str] = set()
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        scoped = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        if scoped:
            names.append(node.name)  # type: ignore[union-attr]
        if isinstance(node, ast.Call) and _reads(node.func):
            found.add(f"{module}:{'.'.join(names)}")
        for child in ast.iter_child_nodes(node):
            visit(child)
        if scoped:
            names.pop()

    visit(tree)
    return found


def _reads(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in READ_CALLS
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else None
        if owner == "self":
            return False  # a method of the object itself (`self.open(...)`), not a file
        return func.attr in READ_CALLS or (owner, func.attr) in READ_MODULE_CALLS
    return False


def declared_readers(package: str = "orchestrator") -> set[str]:
    """Every reader the modules of `package` declare: each is imported, so its declarations
    are made (the core itself never imports the optional parts)."""
    root = importlib.import_module(package)
    for module in pkgutil.walk_packages(root.__path__, f"{package}."):
        if not module.name.endswith(".__main__"):  # running it would run the CLI
            importlib.import_module(module.name)
    return set(readers()) | set(other_reads())


def test_every_file_the_package_reads_is_in_the_inventory_or_explained() -> None:
    declared = declared_readers()
    found = file_reads(PACKAGE)
    undeclared = sorted(found - declared)
    assert not undeclared, (
        "these functions read files but do not say what they read: mark each with "
        "`@reads(kind)` (security/inventory.py; a new kind if it configures a run in a new "
        "way) or `@reads_no_configuration(why)`: " + ", ".join(undeclared)
    )
    stale = sorted(declared - found)
    assert not stale, f"these functions are declared readers but read no file: {stale}"
    assert set(readers().values()) <= {kind.name for kind in KINDS}


def test_a_reader_names_a_kind_of_the_inventory() -> None:
    with pytest.raises(ValueError, match="no kind of the inventory"):
        reads("hooks")


def test_the_inventory_check_catches_a_new_reader(tmp_path: Path) -> None:
    package = tmp_path / "orchestrator"
    package.mkdir()
    (package / "newconfig.py").write_text(
        "import yaml\n\ndef load_hooks(path):\n    return yaml.safe_load(path.read_text())\n"
    )
    assert file_reads(package) == {"orchestrator.newconfig:load_hooks"}


def test_a_new_reader_that_does_not_declare_what_it_reads_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "newpart"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "hooks.py").write_text(
        "import yaml\n"
        "from orchestrator.security.inventory import reads\n\n"
        "@reads('job spec')\n"
        "def load_spec(path):\n    return yaml.safe_load(path.read_text())\n\n"
        "def load_hooks(path):\n    return yaml.safe_load(path.read_text())\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    declared = declared_readers("newpart")
    assert "newpart.hooks:load_spec" in declared
    assert file_reads(package) - declared == {"newpart.hooks:load_hooks"}
