"""Secrets: common secret names are recognised; child processes, traces, `run --json` output and
CLI error lines never carry their values, even when a model echoes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from cli_process import orchestrator
from skill_factory import call, context

from orchestrator import Agent, Permissions
from orchestrator.models import ScriptedModel
from orchestrator.security import MASK, is_secret_name
from orchestrator.skills import SkillCatalog

SECRET_NAMES = [
    "PGPASSWORD",
    "MYSQL_PWD",
    "SECRETKEY",
    "DB_PASSWORD",
    "REDIS_PWD",
    "MY_CLIENT_SECRET_VALUE",
    "GITHUB_TOKEN",
    "SLACKTOKEN",
    "STRIPE_KEY",
    "OPENAI_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "APIKEY",
    "SMTP_PASS",
    "GOOGLE_APPLICATION_CREDENTIALS",
]
PLAIN_NAMES = [
    "PWD",
    "OLDPWD",
    "HOME",
    "PATH",
    "KEYBOARD_LAYOUT",
    "MONKEY",
    "GIT_AUTHOR_NAME",
    "SSH_AUTH_SOCK",
    "TOKENIZERS_PARALLELISM",
    "PASSENGER_COUNT",
]


def test_common_secret_names_are_recognised() -> None:
    assert [n for n in SECRET_NAMES if not is_secret_name(n)] == []
    assert [n for n in PLAIN_NAMES if is_secret_name(n)] == []


async def test_child_processes_get_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in SECRET_NAMES:
        monkeypatch.setenv(name, f"value-of-{name.lower()}")
    shell = next(t for t in SkillCatalog().load("shell").tools if t.name == "shell__run")
    out = await call(shell, context(tmp_path, shell=True), command="env")
    leaked = [name for name in SECRET_NAMES if f"value-of-{name.lower()}" in out]
    assert leaked == []
    assert "PWD=" in out  # the ordinary environment is still there


JOB = """\
name: echo
model: scripted:script.yaml
goal: Say something.
"""


@pytest.mark.slow
def test_a_key_the_model_echoes_is_masked_everywhere_the_cli_writes(tmp_path: Path) -> None:
    secret = "pg-pass-5f3c9a1d7e"
    (tmp_path / "job.yaml").write_text(JOB)
    script = {"goal": [{"content": f"The database password is {secret}."}]}
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    env = {"PGPASSWORD": secret}

    plain = orchestrator("run", "job.yaml", "--trace", "a.jsonl", cwd=tmp_path, env=env)
    as_json = orchestrator("run", "job.yaml", "--json", "--trace", "b.jsonl", cwd=tmp_path, env=env)

    assert plain.returncode == 0 and as_json.returncode == 0
    assert plain.stdout.strip() == f"The database password is {MASK}."
    assert json.loads(as_json.stdout)["output"] == f"The database password is {MASK}."
    for done in (plain, as_json):
        assert secret not in done.stdout + done.stderr
    for trace in ("a.jsonl", "b.jsonl"):
        assert secret not in (tmp_path / trace).read_text()
    shown = orchestrator("trace", "show", "a.jsonl", cwd=tmp_path, env=env)
    assert secret not in shown.stdout


def test_cli_error_lines_are_masked(tmp_path: Path) -> None:
    secret = "sk-live-0123456789abcdef"
    (tmp_path / "job.yaml").write_text(JOB + f"budget: {{max_tokens: {secret}}}\n")
    (tmp_path / "script.yaml").write_text("goal: [{content: hi}]\n")
    done = orchestrator("validate", "job.yaml", cwd=tmp_path, env={"STRIPE_KEY": secret})

    assert done.returncode == 2
    assert "budget.max_tokens" in done.stderr
    assert secret not in done.stderr
    assert MASK in done.stderr


async def test_the_model_cannot_read_the_files_that_hold_keys(tmp_path: Path) -> None:
    key = "sk-dotenv-9f8e7d6c5b4a"
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={key}\n")
    (tmp_path / ".env.local").write_text(f"OTHER={key}\n")
    (tmp_path / "notes.txt").write_text("nothing secret\n")
    calls = [
        ("files__read_file", {"path": ".env"}),
        ("files__read_file", {"path": ".env.local"}),
        ("files__grep", {"pattern": "sk-"}),
        ("files__grep", {"pattern": "sk-", "path": ".env"}),
        ("files__edit_file", {"path": ".env", "old_text": "sk", "new_text": "xx"}),
        ("data__summarize", {"path": ".env"}),
    ]
    turns = [
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": n}}]}
        for n in ("files", "data")
    ]
    turns += [{"tool_calls": [{"name": name, "arguments": args}]} for name, args in calls]
    model = ScriptedModel({"agent": [*turns, {"content": "done"}]})
    agent = Agent(model, skills=[], permissions=Permissions(workspace=tmp_path))
    result = await agent.run("find the key")

    answers = [m for m in result.messages if m.role == "tool"][2:]
    assert [m.error_type for m in answers] == [
        "denied",
        "denied",
        None,
        "denied",
        "denied",
        "denied",
    ]
    assert answers[2].content == "No match for 'sk-'."
    assert all(key not in (m.content or "") for r in model.requests for m in r.messages)
    assert (tmp_path / ".env").read_text() == f"OPENAI_API_KEY={key}\n"
