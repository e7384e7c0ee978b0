"""Every Python example of README.md and docs/*.md passes `mypy --strict` with the project's own
configuration: each block is a complete example a user can paste, and an API change that breaks
one fails here, naming the document and the example's position. The examples that run offline
(a scripted model) also run, as a user would run them, from a copy of `examples/`; the tool
example of docs/agent-api.md fetches from a server on 127.0.0.1."""

from __future__ import annotations

import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator import Agent, Permissions, Tool
from orchestrator.models import ScriptedModel

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
OFFLINE = [
    "readme_example_2",
    "agent_api_example_1",
    "agent_api_example_3",
    "agent_api_example_4",
    "models_example_1",
    "trace_example_1",
    "typed_outputs_example_1",
]
"""The examples that build and run their agents on a scripted or function model: no provider, no
network.
(The embed example of docs/agent-api.md runs in tests/test_docs_match.py, from its own folder;
README's `tools.py` is the file `orchestrator init` writes, tests/test_readme_blocks.py.)"""
SHOWN_OUTPUT = re.compile(r"^print\(.*\)  # (.+)$", re.MULTILINE)


def examples() -> dict[str, str]:
    """Each ```python block, keyed by a module name made of its document and its position."""
    found: dict[str, str] = {}
    for document in DOCUMENTS:
        blocks = PYTHON_BLOCK.findall(document.read_text(encoding="utf-8"))
        stem = document.stem.lower().replace("-", "_")
        found.update({f"{stem}_example_{n}": code for n, code in enumerate(blocks, start=1)})
    return found


def test_the_docs_have_python_examples() -> None:
    names = examples()
    assert any(name.startswith("readme_") for name in names)
    assert any(not name.startswith("readme_") for name in names)


@pytest.mark.slow
def test_every_python_example_in_the_docs_passes_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    files = []
    for name, code in examples().items():
        path = tmp_path / f"{name}.py"
        path.write_text(code, encoding="utf-8")
        files.append(path.name)
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--strict",
        "--no-incremental",
        *files,
    ]
    environment = {**os.environ, "MYPYPATH": str(ROOT)}
    done = subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", OFFLINE)
def test_the_offline_examples_run(name: str, tmp_path: Path) -> None:
    code = examples()[name]
    assert "scripted" in code.lower() or "FunctionModel" in code, (
        f"{name} is not the offline example it was"
    )
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("out"))
    (tmp_path / f"{name}.py").write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, f"{name}.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    # What an example says it prints (`print(...)  # completed 2 + 3 = 5`), it prints.
    for shown in SHOWN_OUTPUT.findall(code):
        assert shown in done.stdout.splitlines(), (shown, done.stdout)


class _Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404 if self.path == "/missing" else 200)
        self.end_headers()
        self.wfile.write(b"hello page text")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def pages() -> Iterator[int]:
    """A web server on 127.0.0.1, its port: `/missing` is a 404, any other page a text."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_port
    server.shutdown()
    server.server_close()


def test_the_tool_example_fetches_and_says_what_went_wrong(pages: int, tmp_path: Path) -> None:
    (code,) = [code for code in examples().values() if "def fetch_page(" in code]
    (tmp_path / "fetch_page_example.py").write_text(code, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(
        "fetch_page_example", tmp_path / "fetch_page_example.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fetch_page: Tool = module.fetch_page
    calls = [
        {"name": "fetch_page", "arguments": {"url": f"http://127.0.0.1:{pages}/a", "max_chars": 5}},
        {"name": "fetch_page", "arguments": {"url": f"http://127.0.0.1:{pages}/missing"}},
        {"name": "fetch_page", "arguments": {"url": "http://example.com/"}},
    ]
    model = ScriptedModel({"*": [{"tool_calls": calls}, {"content": "done"}]})
    allowed = Permissions(network=[f"127.0.0.1:{pages}"])

    result = Agent(model, [fetch_page], permissions=allowed).run_sync("Fetch the pages.")

    assert [m.content for m in result.messages if m.role == "tool"] == [
        "hello",
        f"http://127.0.0.1:{pages}/missing answered 404; try another page",
        "Permission denied: network access to example.com needs that host in the `network` "
        f"permission (allowed hosts: 127.0.0.1:{pages}).",
    ]
