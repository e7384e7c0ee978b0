"""Secrets: common secret names are recognised; child processes, traces, `run --json` output and
CLI error lines never carry their values, even when a model echoes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from cli_process import orchestrator
from provider_server import ProviderServer
from skill_factory import call, context

from orchestrator import Agent, Orchestrator, Permissions
from orchestrator.errors import SafetyWarning
from orchestrator.jobs import load_job
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


PINNED_KEY = "sk-pinned-key-5521-do-not-send"


def _pinning_job(folder: Path, url: str, pinned: str, permissions: str = "") -> Path:
    (folder / ".env").write_text(f"OPENAI_API_KEY={PINNED_KEY}\n")
    (folder / "notes.md").write_text("Plain notes: nothing secret here.\n")
    spec = folder / "job.yaml"
    spec.write_text(
        "name: pins\n"
        f"model: {{name: 'openai-compatible:m', base_url: '{url}', max_retries: 0}}\n"
        f"pinned: {pinned}\n"
        f"{permissions}"
        "steps:\n  - {id: one, task: Summarise the pinned context.}\n"
    )
    return spec


@pytest.mark.parametrize(
    ("pinned", "permissions", "made"),
    [
        ("[context.md]", "", "link"),  # a link to .env
        ("[.env]", "", "none"),
        ("[{file: keys.txt}]", "permissions: {secret_files: ['keys.txt']}\n", "copy"),
    ],
)
def test_a_pinned_file_that_holds_keys_is_refused_before_any_request(
    tmp_path: Path, pinned: str, permissions: str, made: str
) -> None:
    with ProviderServer({"*": [{"content": "summary"}] * 3}) as server:
        _pinning_job(tmp_path, server.openai_url, pinned, permissions)
        if made == "link":
            (tmp_path / "context.md").symlink_to(tmp_path / ".env")
        elif made == "copy":
            (tmp_path / "keys.txt").write_text(f"token={PINNED_KEY}\n")
        checked = orchestrator("validate", "job.yaml", cwd=tmp_path)
        ran = orchestrator("run", "job.yaml", cwd=tmp_path)
        bodies = server.bodies()

    assert checked.returncode != 0 and "pinned[0].file" in checked.stdout + checked.stderr
    assert ran.returncode != 0
    assert "pinned[0].file" in ran.stderr and "holds keys" in ran.stderr
    assert all(PINNED_KEY not in json.dumps(body) for body in bodies)


async def test_a_pin_turned_into_a_link_to_keys_after_the_check_is_not_sent(
    tmp_path: Path,
) -> None:
    with ProviderServer({"*": [{"content": "summary"}] * 3}) as server:
        spec = _pinning_job(tmp_path, server.openai_url, "[notes.md]")
        job = load_job(spec)  # checked while it held plain notes
        (tmp_path / "notes.md").unlink()
        (tmp_path / "notes.md").symlink_to(tmp_path / ".env")
        with pytest.warns(SafetyWarning, match="pinned file refused"):
            done = await Orchestrator.from_job(job).run_job(trace=tmp_path / "t.jsonl")
        bodies = server.bodies()

    assert done.status == "completed"
    assert bodies and all(PINNED_KEY not in json.dumps(body) for body in bodies)
    assert "(refused: it holds keys)" in json.dumps(bodies[0])
