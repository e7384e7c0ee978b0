"""The interop tier: real jobs against a real OpenAI-compatible server and a real small model.

One llama-cpp-python server (`chatml-function-calling`) serves SmolLM2-135M-Instruct on
127.0.0.1 for the whole session (interop_server.py). Nothing here is scripted: the tiny model
makes its own (mostly wrong) decisions, so the tests assert only what must hold whatever it
says (invariants.py): no request refused, every tool call answered, a defined status, and
every request rebuilt from the trace.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from interop_server import ROOT, LlamaServer, start_server, stop_server


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The server, started once for the tier and stopped after it."""
    process, server = start_server(tmp_path_factory.mktemp("llama") / "server.log")
    try:
        yield server
    finally:
        stop_server(process)


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    """A copy of the quickstart job and its notes, whose model and budget each test sets."""
    shutil.copy(ROOT / "examples" / "quickstart.yaml", tmp_path / "quickstart.yaml")
    shutil.copytree(ROOT / "examples" / "quickstart", tmp_path / "quickstart")
    return tmp_path / "quickstart.yaml"
