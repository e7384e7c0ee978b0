"""`orchestrator run-batch`: one job per input row, one results line each, reruns skip done rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_process import orchestrator

JOB = """\
name: rows
model: scripted:script.yaml
inputs: {city: null}
steps:
  - {id: answer, task: "Weather in {inputs.city}?"}
"""


def make_batch(folder: Path, rows: str, suffix: str = "jsonl") -> Path:
    (folder / "job.yaml").write_text(JOB, encoding="utf-8")
    (folder / "script.yaml").write_text('answer: [{content: "mild"}]\n', encoding="utf-8")
    inputs = folder / f"rows.{suffix}"
    inputs.write_text(rows, encoding="utf-8")
    return inputs


def results(folder: Path) -> list[dict]:
    text = (folder / "rows.results.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def asked(line: dict, folder: Path) -> str:
    """The task the row's agent was given, from the row's own trace."""
    trace = folder / line["trace"]
    for raw in trace.read_text(encoding="utf-8").splitlines():
        event = json.loads(raw)
        if event["type"] == "message" and event["message"]["role"] == "user":
            return event["message"]["content"]
    raise AssertionError(f"no task in {trace}")


def test_one_job_per_row_and_a_rerun_skips_the_rows_done(tmp_path: Path) -> None:
    rows = '{"id": "a", "city": "Oslo"}\n{"id": "b", "note": "no city"}\n{"city": "Lima"}\n'
    make_batch(tmp_path, rows)
    first = orchestrator("run-batch", "job.yaml", "--inputs", "rows.jsonl", cwd=tmp_path)
    assert first.returncode == 3, first.stderr  # one row could not run
    lines = results(tmp_path)
    assert sorted(line["id"] for line in lines) == ["3", "a", "b"]
    by_id = {line["id"]: line for line in lines}
    assert by_id["a"]["status"] == by_id["3"]["status"] == "completed"
    assert asked(by_id["a"], tmp_path) == "Weather in Oslo?"
    assert asked(by_id["3"], tmp_path) == "Weather in Lima?"
    assert by_id["b"]["status"] == "error" and "city" in by_id["b"]["error"]
    assert "row 2 (b): error" in first.stderr

    again = orchestrator("run-batch", "job.yaml", "--inputs", "rows.jsonl", cwd=tmp_path)
    assert again.returncode == 3
    assert "1 row run (0 completed, 1 not), 2 already done" in again.stderr
    assert [line["id"] for line in results(tmp_path)[3:]] == ["b"]  # only the failed row again


@pytest.mark.parametrize("executor", ["local", "ray"])
@pytest.mark.slow
def test_one_budget_for_the_batch_stops_rows_a_budget_per_job_would_not(
    tmp_path: Path, executor: str, request: pytest.FixtureRequest
) -> None:
    where = []
    if executor == "ray":
        where = ["--executor", "ray", "--ray-address", request.getfixturevalue("ray_cluster")]
    make_batch(tmp_path, "city\nOslo\nLima\nPune\n", suffix="csv")
    common = ["run-batch", "job.yaml", "--inputs", "rows.csv", "--concurrency", "1", *where]
    own = orchestrator(*common, cwd=tmp_path)  # each job has its own (unlimited) budget
    assert own.returncode == 0, own.stderr
    assert [line["status"] for line in results(tmp_path)] == ["completed"] * 3
    per_row = max(line["usage"]["total_tokens"] for line in results(tmp_path))

    (tmp_path / "rows.results.jsonl").unlink()
    # Room for two rows of the three, not for the third: each call also reserves the default
    # 4,096 output tokens before it is made.
    cap = str(per_row * 5 // 2 + 4096)
    shared = orchestrator(*common, "--budget", "batch", "--max-tokens", cap, cwd=tmp_path)
    assert shared.returncode == 3, shared.stderr
    lines = results(tmp_path)
    statuses = [line["status"] for line in sorted(lines, key=lambda line: line["row"])]
    assert statuses[:2] == ["completed", "completed"]
    assert statuses[2] == "budget_exhausted"  # the batch's tokens were gone
    assert sum(line["usage"]["total_tokens"] for line in lines) <= int(cap)


@pytest.mark.slow
def test_bad_batch_arguments_are_clear_errors(tmp_path: Path) -> None:
    make_batch(tmp_path, "city\nOslo\n", suffix="csv")
    (tmp_path / "rows.txt").write_text("x", encoding="utf-8")
    cases = {
        ("--inputs", "rows.txt"): "expected a .csv or .jsonl file",
        ("--inputs", "missing.csv"): "cannot read the inputs",
        ("--inputs", "rows.csv", "--budget", "batch"): "--budget batch needs --max-tokens",
        ("--inputs", "rows.csv", "--max-tokens", "9"): "give --budget batch",
        ("--inputs", "rows.csv", "--budget", "batch", "--max-cost-usd", "0"): "--max-cost-usd X",
    }
    for args, message in cases.items():
        done = orchestrator("run-batch", "job.yaml", *args, cwd=tmp_path)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)


@pytest.mark.slow
def test_a_batch_budget_in_money_and_the_specs_own_cap_both_hold(tmp_path: Path) -> None:
    make_batch(tmp_path, "city\nOslo\nLima\nPune\n", suffix="csv")
    spec = tmp_path / "job.yaml"
    spec.write_text(spec.read_text() + "prices:\n  scripted: {input: 10, output: 10}\n")
    common = ["run-batch", "job.yaml", "--inputs", "rows.csv", "--concurrency", "1"]
    # A row spends about $0.013 (1,313 tokens at $10/M), but its call first reserves the most
    # it could cost (its input and a 4,096-token output allowance: about $0.054). After two
    # rows, $0.026 is spent and a third reservation would pass $0.075: that row is refused.
    done = orchestrator(*common, "--budget", "batch", "--max-cost-usd", "0.075", cwd=tmp_path)
    lines = sorted(results(tmp_path), key=lambda line: line["row"])
    assert done.returncode == 3, done.stderr
    assert [line["status"] for line in lines][:2] == ["completed", "completed"]
    assert lines[2]["status"] == "budget_exhausted"
    assert sum(line["cost"] for line in lines if line["cost"]) <= 0.075
    (tmp_path / "rows.results.jsonl").unlink()
    # The spec's own max_tokens still caps each job inside a batch budget.
    spec.write_text(spec.read_text().replace("steps:", "budget: {max_tokens: 50}\nsteps:"))
    capped = orchestrator(*common, "--budget", "batch", "--max-tokens", "100000", cwd=tmp_path)
    assert capped.returncode == 3, capped.stderr
    assert {line["status"] for line in results(tmp_path)} == {"budget_exhausted"}


def test_a_secret_in_a_jobs_output_never_reaches_the_results_file(tmp_path: Path) -> None:
    secret = "sk-batch-secret-value-42"
    rows = '{"id": "a", "city": "Oslo"}\n{"id": "b", "note": "no city"}\n'
    make_batch(tmp_path, rows)
    (tmp_path / "script.yaml").write_text(
        f'answer: [{{content: "key {secret}, mirror https://ann:pw-in-url@mirror.example/x"}}]\n',
        encoding="utf-8",
    )
    env = {"BATCH_API_KEY": secret}
    ran = orchestrator(
        "run-batch",
        "job.yaml",
        "--inputs",
        "rows.jsonl",
        "--set",
        f"city={secret}",
        cwd=tmp_path,
        env=env,
    )
    text = (tmp_path / "rows.results.jsonl").read_text(encoding="utf-8")
    assert secret not in text and "pw-in-url" not in text
    by_id = {line["id"]: line for line in results(tmp_path)}
    assert by_id["a"]["output"] == "key [REDACTED], mirror https://[REDACTED]@mirror.example/x"
    assert secret not in ran.stderr and secret not in ran.stdout


def test_a_credential_the_spec_names_is_masked_whatever_its_variable_is_called(
    tmp_path: Path,
) -> None:
    """`token_env` names a remote agent's bearer token: the batch masks its value in the
    results file and on stderr, though `FAR_BEARER` does not look like a secret's name."""
    token = "b3arer-value-8c21f0"
    make_batch(tmp_path, '{"id": "a", "city": "Oslo"}\n')
    spec = JOB + "agents:\n  far: {a2a: 'http://127.0.0.1:9/', token_env: FAR_BEARER}\n"
    (tmp_path / "job.yaml").write_text(spec, encoding="utf-8")
    (tmp_path / "script.yaml").write_text(
        f'answer: [{{content: "the remote wants {token}"}}]\n', encoding="utf-8"
    )
    ran = orchestrator(
        "run-batch", "job.yaml", "--inputs", "rows.jsonl", cwd=tmp_path,
        env={"FAR_BEARER": token},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    [line] = results(tmp_path)
    assert line["output"] == "the remote wants [REDACTED]"
    assert token not in (tmp_path / "rows.results.jsonl").read_text(encoding="utf-8")
    assert token not in ran.stderr and token not in ran.stdout


def test_a_line_separator_in_an_output_does_not_run_a_done_row_again(tmp_path: Path) -> None:
    make_batch(tmp_path, '{"id": "a", "city": "Oslo"}\n')
    (tmp_path / "script.yaml").write_text(
        'answer: [{content: "mild\\u2028then windy\\u2029then calm"}]\n', encoding="utf-8"
    )
    first = orchestrator("run-batch", "job.yaml", "--inputs", "rows.jsonl", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = orchestrator("run-batch", "job.yaml", "--inputs", "rows.jsonl", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "0 rows run (0 completed, 0 not), 1 already done" in again.stderr


def test_a_damaged_results_line_stops_the_batch_naming_it(tmp_path: Path) -> None:
    make_batch(tmp_path, '{"id": "a", "city": "Oslo"}\n{"id": "b", "city": "Lima"}\n')
    (tmp_path / "rows.results.jsonl").write_text('{"id": "a", "status": "compl\n', encoding="utf-8")
    done = orchestrator("run-batch", "job.yaml", "--inputs", "rows.jsonl", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "rows.results.jsonl, line 1: not JSON" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_csv_field_past_the_csv_default_limit_reads_whole(tmp_path: Path) -> None:
    from orchestrator.jobs.batch import read_rows

    long_city = "Oslo " * 40_000  # 200,000 characters, past csv's default 131,072
    inputs = make_batch(tmp_path, f'id,city\nlong,"{long_city}"\nodd,"Li\u2028ma"\n', "csv")
    rows = read_rows(inputs)
    assert [(row.id, row.values["city"]) for row in rows] == [
        ("long", long_city),
        ("odd", "Li\u2028ma"),
    ]
    done = orchestrator("run-batch", "job.yaml", "--inputs", "rows.csv", cwd=tmp_path)
    assert "Traceback" not in done.stderr and "row 2 (odd): completed" in done.stderr


def test_a_row_nested_too_deeply_is_an_error_naming_it(tmp_path: Path) -> None:
    levels = 100_000
    make_batch(tmp_path, '{"id": "a", "city": ' + "[" * levels + "]" * levels + "}\n")
    done = orchestrator("run-batch", "job.yaml", "--inputs", "rows.jsonl", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "rows.jsonl, line 1: the JSON is nested too deeply" in done.stderr
    assert "Traceback" not in done.stderr
