"""A run says which sandbox confines its commands: on stderr at its start (`orchestrator run`),
in `trace show` (text and JSON) and in the HTML report; a run that allows no command says
nothing of one, and an unconfined one says so."""

from __future__ import annotations

import json
from pathlib import Path

from cli_process import orchestrator
from test_sandbox import SPEC, needs_bubblewrap


def run_job(tmp_path: Path, permissions: str) -> str:
    (tmp_path / "script.yaml").write_text("only: [{content: listed}]\n")
    spec = SPEC.format(permissions=permissions) + "trace: trace.jsonl\n"
    (tmp_path / "job.yaml").write_text(spec)
    done = orchestrator("run", "job.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stderr


def shown(tmp_path: Path) -> tuple[str, dict[str, object], str]:
    """`trace show` as text and as JSON, and the report's page."""
    text = orchestrator("trace", "show", "trace.jsonl", cwd=tmp_path)
    as_json = orchestrator("trace", "show", "trace.jsonl", "--json", cwd=tmp_path)
    page = orchestrator("report", "trace.jsonl", "-o", "report.html", cwd=tmp_path)
    assert text.returncode == as_json.returncode == page.returncode == 0, page.stderr
    return text.stdout, json.loads(as_json.stdout), (tmp_path / "report.html").read_text()


@needs_bubblewrap
def test_a_run_says_its_bubblewrap_sandbox_at_start_in_trace_show_and_the_report(
    tmp_path: Path,
) -> None:
    stderr = run_job(tmp_path, "{shell: true, sandbox: {backend: bubblewrap}}")

    [line] = [line for line in stderr.splitlines() if line.startswith("sandbox: ")]
    assert line.startswith("sandbox: bubblewrap (processes: ")
    assert "network: none" in line
    text, as_json, page = shown(tmp_path)
    assert line in text.splitlines()
    assert as_json["sandbox"] == [line.removeprefix("sandbox: ")]
    assert 'class="sandbox' in page and line in page


def test_an_unconfined_run_says_so_everywhere(tmp_path: Path) -> None:
    stderr = run_job(tmp_path, "{shell: true, sandbox: {backend: none}}")

    assert "sandbox: none (UNCONFINED: as the user)" in stderr.splitlines()
    text, as_json, page = shown(tmp_path)
    assert "sandbox: none (UNCONFINED: as the user)" in text.splitlines()
    assert as_json["sandbox"] == ["none"]
    assert "UNCONFINED" in page


def test_a_run_that_allows_no_command_names_no_sandbox(tmp_path: Path) -> None:
    stderr = run_job(tmp_path, "{shell: false}")

    assert not [line for line in stderr.splitlines() if line.startswith("sandbox:")]
    text, as_json, page = shown(tmp_path)
    assert not [line for line in text.splitlines() if line.startswith("sandbox:")]
    assert as_json["sandbox"] == []
    assert 'class="sandbox' not in page
