"""`orchestrator ask` and `run --stream` as a user runs them: real processes, a real server."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cli_process import orchestrator
from provider_server import Fault, ProviderServer
from trace_lines import trace_lines

from orchestrator.cli.output import AnswerStream
from orchestrator.messages import Message
from orchestrator.models import ModelResponse
from orchestrator.security import is_secret_name

ROOT = Path(__file__).resolve().parents[1]
ANSWER = "Hello there, this is the whole answer."


def test_ask_prints_only_the_answer(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(
        "planner:\n"
        "  - content: Let me look first.\n"
        "    tool_calls: [{name: search_skills, arguments: {query: notes}}]\n"
        f"  - content: {ANSWER}\n"
    )

    done = orchestrator(
        "ask", "Say hello.", "--model", "scripted:s.yaml", "--trace", "t.jsonl", cwd=tmp_path
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout == ANSWER + "\n"
    assert "ask: completed in" in done.stderr and "trace: t.jsonl" in done.stderr
    ends = [e for e in trace_lines(tmp_path / "t.jsonl") if e["type"] == "run_end"]
    assert [(e["agent"], e["status"]) for e in ends] == [("planner", "completed")]


@pytest.mark.slow
def test_ask_without_a_model_says_how_to_give_one(tmp_path: Path, own_config_folder: Path) -> None:
    done = orchestrator("ask", "Say hello.", cwd=tmp_path)

    assert done.returncode == 2
    assert "no model: pass --model" in done.stderr
    assert str(own_config_folder / "orchestrator" / "models.yaml") in done.stderr

    (tmp_path / "s.yaml").write_text(f"planner: [{{content: '{ANSWER}'}}]\n")
    (own_config_folder / "orchestrator").mkdir(parents=True, exist_ok=True)
    (own_config_folder / "orchestrator" / "models.yaml").write_text(
        f"default: scripted:{tmp_path / 's.yaml'}\n"
    )
    done = orchestrator("ask", "Say hello.", "--quiet", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, ANSWER + "\n")


def test_ask_without_a_key_names_only_where_ask_looks(tmp_path: Path) -> None:
    """`ask` has no job spec: its missing key is looked for in the environment and in this
    folder's .env, and the error says just that."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "ask", "Hi.", "-m", "openai:gpt-4o-mini"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert "set OPENAI_API_KEY in the environment or in a .env file in this folder" in done.stderr
    assert "job spec" not in done.stderr


def read_into(process: subprocess.Popen[bytes], out: bytearray, count: int) -> None:
    assert process.stdout is not None
    while len(out) < count and (data := os.read(process.stdout.fileno(), count - len(out))):
        out.extend(data)


def test_ask_streams_the_answer_as_it_arrives(tmp_path: Path) -> None:
    release = threading.Event()
    with ProviderServer({"*": [{"content": ANSWER}]}) as server:
        server.fail(Fault("pause", after=3, release=release))  # two fragments, then a pause
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "ask", "Say hello.", "--quiet"]
            + ["--model", "openai-compatible:m", "--model-option", f"base_url={server.openai_url}"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # Without secrets to mask, nothing is held back to see whether a secret begins.
            env={k: v for k, v in os.environ.items() if not is_secret_name(k)},
        )
        try:
            first = bytearray()
            reader = threading.Thread(target=read_into, args=(process, first, 8))
            reader.start()
            reader.join(timeout=30)  # the server holds the rest back until `release`
            arrived_first = bytes(first)
            release.set()
            reader.join()
            rest, errors = process.communicate(timeout=120)
        finally:
            release.set()
            if process.poll() is None:
                process.kill()

    assert arrived_first == ANSWER[:8].encode()
    assert (bytes(first) + rest).decode() == ANSWER + "\n", errors.decode()
    assert process.returncode == 0


def test_run_stream_writes_the_output_steps_answer_once(tmp_path: Path) -> None:
    done = orchestrator(
        "run",
        str(ROOT / "examples" / "quickstart.yaml"),
        "--stream",
        "--quiet",
        "--trace",
        "t.jsonl",
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    (goal,) = [
        e
        for e in trace_lines(tmp_path / "t.jsonl")
        if e["type"] == "run_end" and e["agent"] == "goal"
    ]
    assert done.stdout.endswith("\n") and done.stdout.rstrip() == goal["output"].rstrip()
    assert "in parallel" not in done.stdout  # the text of a turn that called tools is not shown


def test_a_secret_split_over_fragments_is_masked_on_stdout() -> None:
    secret = "sk-live-0123456789abcdef"
    out = io.StringIO()
    stream = AnswerStream(out, secrets=[secret])
    answer = f"The key is {secret}, do not share it."
    for index in range(0, len(answer), 5):
        stream.text(answer[index : index + 5])
        assert secret[:12] not in out.getvalue()  # never even part of it
    stream.turn_end(ModelResponse(message=Message.assistant(answer)))
    stream.finish(answer)

    assert out.getvalue() == "The key is [REDACTED], do not share it.\n"
