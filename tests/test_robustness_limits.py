"""Bounded time and memory: a server that trickles bytes or never ends a stream cannot hold a
model call or an `http__get`; a reply too large fails clearly; big files and bodies are read in
bounded memory. A real hostile server on 127.0.0.1 (tests/hostile_server.py) and real files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_server import hostile_server
from skill_factory import call, context

from orchestrator import Agent
from orchestrator.agent import Tool
from orchestrator.errors import ToolError
from orchestrator.models import resolve_model
from orchestrator.skills import SkillCatalog


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with hostile_server() as url:
        yield url


@pytest.fixture(scope="module")
def http() -> dict[str, Tool]:
    return {t.name: t for t in SkillCatalog().load("http").tools}


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.slow
async def test_a_model_call_has_a_whole_call_deadline(server: str, stream: bool) -> None:
    # Bytes arrive every 0.3 s, so the 1 s silence timeout never fires; the deadline does.
    model = resolve_model(
        "openai-compatible:slow",
        base_url=f"{server}/v1",
        stream=stream,
        timeout=1,
        deadline=2,
        max_retries=0,
    )
    result = await Agent(model).run("go")

    assert result.status == "error"
    assert "within the call's deadline of 2 s (the `deadline` setting)" in (result.error or "")


async def test_a_model_reply_has_a_size_cap(server: str) -> None:
    model = resolve_model(
        "openai-compatible:big",
        base_url=f"{server}/huge/5/v1",
        stream=False,
        max_reply_bytes=1_000_000,
        max_retries=0,
    )
    result = await Agent(model).run("go")

    assert result.status == "error"
    assert "larger than 1,000,000 bytes (the `max_reply_bytes` setting)" in (result.error or "")


@pytest.mark.slow
async def test_http_get_has_a_whole_call_deadline(http: dict[str, Tool], server: str) -> None:
    ctx = context(Path(), network=["127.0.0.1"])
    with pytest.raises(ToolError, match="did not finish within 2 s"):
        await call(http["http__get"], ctx, url=f"{server}/trickle", timeout_seconds=2)


def peak_growth(code: str, cwd: Path) -> dict[str, object]:
    """Run `code` in a fresh interpreter; its JSON line plus the growth of its peak RSS (MB)
    over what it had before `code` ran (imports and setup done)."""
    wrapper = f"""
        import json, resource
        from orchestrator import Permissions
        from orchestrator.agent import ToolContext
        from orchestrator.skills import SkillCatalog
        tools = {{t.name: t for s in ("files", "http") for t in SkillCatalog().load(s).tools}}
        ctx = ToolContext(agent="t", permissions=Permissions(workspace=".", network=["127.0.0.1"]))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        {textwrap.indent(textwrap.dedent(code), " " * 8).strip()}
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({{"result": result, "growth_mb": (after - before) / 1024}}))
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(wrapper)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


READ = """
import asyncio
tool = tools["files__read_file"]
result = asyncio.run(tool.invoke(tool.parse_arguments('{{"path": "{name}"}}'), ctx))
"""


@pytest.fixture(scope="module")
def big_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("big")
    with (folder / "one-line.txt").open("w") as out:
        for _ in range(200):
            out.write("y" * 1_000_000)
    with (folder / "many-lines.txt").open("w") as out:
        line = "a short line of text\n"
        for _ in range(200_000_000 // len(line) // 10_000):
            out.write(line * 10_000)
    return folder


@pytest.mark.parametrize("name", ["one-line.txt", "many-lines.txt"])
@pytest.mark.slow
def test_read_file_of_200_mb_stays_in_bounded_memory(big_files: Path, name: str) -> None:
    found = peak_growth(READ.format(name=name), big_files)
    text = str(found["result"])

    assert float(str(found["growth_mb"])) < 40  # was 500-600 MB: the whole file, twice
    body, note = text.rsplit("\n", 1)
    assert len(body) <= 50_000
    if name == "one-line.txt":
        assert note == "[lines 1-1 of 1; line 1 is cut at 50,000 characters]"
    else:
        assert note.startswith("[lines 1-2380 of 9520000; output capped, read on with")


@pytest.mark.slow
def test_http_get_of_200_mb_stays_in_bounded_memory(server: str, tmp_path: Path) -> None:
    code = f"""
        import asyncio
        tool = tools["http__get"]
        args = tool.parse_arguments('{{"url": "{server}/huge/200", "timeout_seconds": 60}}')
        result = asyncio.run(tool.invoke(args, ctx))
    """
    found = peak_growth(code, tmp_path)
    text = str(found["result"])

    assert float(str(found["growth_mb"])) < 40  # was about 700 MB
    assert text.endswith("[... the body (200,000,000 bytes) goes on; only its start is shown]")
