"""Credentials written into a URL (`https://user:pass@host/`) are masked wherever a URL is
printed or recorded, whether or not any variable names them as secret."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from cli_process import orchestrator

from orchestrator.security import SecretMask, mask_url_credentials

PASSWORD = "pw-in-the-url-7731"


def test_the_mask_hides_the_userinfo_of_any_url() -> None:
    mask = SecretMask([])
    assert mask(f"GET https://bob:{PASSWORD}@models.example/v1 failed") == (
        "GET https://[REDACTED]@models.example/v1 failed"
    )
    assert mask(f"redis://:{PASSWORD}@127.0.0.1:6379/0") == "redis://[REDACTED]@127.0.0.1:6379/0"
    assert (
        mask(json.dumps({"url": f"http://tok{PASSWORD}@h/"})) == '{"url": "http://[REDACTED]@h/"}'
    )
    unchanged = "mail bob@example.com, see https://example.com/a@b and ssh git@host:x"
    assert mask_url_credentials(unchanged) == unchanged


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_model_url_with_credentials_is_masked_on_stderr_in_the_trace_and_trace_show(
    tmp_path: Path,
) -> None:
    url = f"http://alice:{PASSWORD}@127.0.0.1:{_closed_port()}/v1"
    (tmp_path / "job.yaml").write_text(
        "name: creds\n"
        f"model: {{name: 'openai-compatible:m', base_url: '{url}', stream: false,"
        " max_retries: 0}\n"
        "goal: say hi\n"
        "trace: run.jsonl\n",
        encoding="utf-8",
    )
    ran = orchestrator("run", "job.yaml", cwd=tmp_path, env={"OPENAI_API_KEY": "x"})
    assert ran.returncode != 0
    assert "127.0.0.1" in ran.stderr + ran.stdout  # the URL is named, its credentials not
    assert PASSWORD not in ran.stderr + ran.stdout
    trace = (tmp_path / "run.jsonl").read_text(encoding="utf-8")
    assert PASSWORD not in trace and "[REDACTED]@127.0.0.1" in trace
    shown = orchestrator("trace", "show", "run.jsonl", cwd=tmp_path)
    assert PASSWORD not in shown.stdout + shown.stderr
