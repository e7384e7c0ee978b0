"""A small eval against the real server and model: the disclosure A/B of the word-count job.

A 135M model's scores are not the point: the eval's machinery is (every run ends with a line,
every request reaches the server and is answered, the table is printed, each mode's tools
array is what it says). The table it prints is the one docs/eval.md shows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from interop_server import ROOT, LlamaServer, edit_spec
from invariants import check_statuses, check_trace

from orchestrator.eval import load_eval

pytestmark = pytest.mark.interop


def test_the_disclosure_ab_against_the_real_model(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    job_folder = tmp_path / "word-count"
    shutil.copytree(ROOT / "examples" / "evals" / "word-count", job_folder)
    edit_spec(
        job_folder / "job.yaml",
        model=llama_server.model(stream=False),
        budget={"max_tokens": 60000, "max_steps": 3},
    )
    (tmp_path / "ab.eval.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "disclosure-ab-smollm2",
                "job": "word-count/job.yaml",
                "cases": [
                    {
                        "id": "seven",
                        "files": {"input.txt": "Nobody owns the notes yet, sadly ok."},
                        "expected": {"words": 7},
                    },
                    {
                        "id": "three",
                        "files": {"input.txt": "Ship it Friday."},
                        "expected": {"words": 3},
                    },
                ],  # fmt: skip
                "scorers": [
                    {"status": "completed"},
                    {"file": {"path": "out/count.txt", "equals": "{expected.words}"}},
                ],
                "matrix": {"disclosure": ["progressive", "eager"]},
                "concurrency": 1,
            }
        )
    )
    offset = llama_server.log_size()
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "eval", "ab.eval.yaml", "--out", "out"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    print(done.stdout)  # the measured table (pytest -s shows it)
    assert done.returncode == 0, done.stderr
    assert "disclosure=progressive" in done.stdout and "disclosure=eager" in done.stdout
    check_statuses(llama_server.statuses_since(offset))
    loaded = load_eval(tmp_path / "ab.eval.yaml")
    assert len(loaded.variants) == 2
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4
    for mode in ("progressive", "eager"):
        for case in ("seven", "three"):
            trace = tmp_path / "out" / "traces" / f"disclosure={mode}" / f"{case}-1.jsonl"
            events = check_trace(trace)
            calls = [e for e in events if e["type"] == "model_call"]
            assert calls, "every run reached the server"
            # Each mode's tools array, the same on every request of the run.
            assert all(call["tools"] == calls[0]["tools"] for call in calls)
            eager_tool = "word-stats__tally" in calls[0]["tools"]
            assert eager_tool == (mode == "eager")
            ended = [e for e in events if e["type"] == "job_end"]
            assert ended and ended[0]["status"] in {"completed", "failed", "budget_exhausted"}


def test_a_skills_trigger_eval_against_the_real_model(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    """`orchestrator eval SKILL_FOLDER` with the example's four trigger queries of the
    built-in `data` skill, progressive and eager, the skill alone in its catalog. What the
    tiny model decides is its own; the bookkeeping must hold whatever it decides: four
    queries counted per variant, each line's verdict the one its trace shows, precision and
    recall computed from those verdicts, and no request refused."""
    config = tmp_path / "config" / "orchestrator"
    config.mkdir(parents=True)
    # A long timeout: on a busy shared CPU the eager requests (every tool's schema) are slow.
    alias = {"smollm2": llama_server.model(stream=False, timeout=600)}
    (config / "models.yaml").write_text(yaml.safe_dump(alias))
    (tmp_path / "no-other-skills").mkdir()
    example = ROOT / "examples" / "evals" / "data-skill"
    offset = llama_server.log_size()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "eval",
            str(ROOT / "orchestrator" / "_builtin" / "skills" / "data"),
            "--triggers-file",
            str(example / "trigger_eval.json"),
            "--only",
            "trigger",
            "-m",
            "smollm2",
            "--catalog",
            "no-other-skills",
            "--alone",
            "--disclosure",
            "progressive",
            "--disclosure",
            "eager",
            "--concurrency",
            "1",
            # The trigger is decided by the first reply; the second step (the last, tools
            # off) only ends a run that did not load it. Two calls a query keep it short.
            "--trigger-steps",
            "2",
            "--out",
            "out",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=2400,
        cwd=tmp_path,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")},
    )
    print(done.stderr)  # a line per run (pytest -s shows them)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    print(json.dumps(summary["variants"], indent=1))  # the measured figures
    check_statuses(llama_server.statuses_since(offset))
    lines = [
        json.loads(line)
        for line in (tmp_path / "out" / "data" / "trigger" / "results.jsonl")
        .read_text()
        .splitlines()
    ]
    assert len(lines) == 8 and all(line["done"] for line in lines)
    assert not any(line.get("error") or line.get("divergence") for line in lines)
    rows = {row["variant"]: row for row in summary["variants"]}
    assert set(rows) == {"progressive", "eager"}
    for mode, row in rows.items():
        mine = [line for line in lines if line["variant"] == mode]
        assert sorted(line["case"] for line in mine) == ["q1", "q2", "q3", "q4"]
        for line in mine:
            events = check_trace(tmp_path / line["trace"])  # named from the eval's folder
            loaded = any(e["type"] == "skill_loaded" and e["skill"] == "data" for e in events)
            called = any(
                e["type"] == "tool_start" and str(e.get("name")).startswith("data__")
                for e in events
            )
            assert line["trigger"]["fired"] == (loaded or called), line["key"]
            calls = [e for e in events if e["type"] == "model_call"]
            assert calls, "every run reached the server"
            assert ("data__aggregate" in calls[0]["tools"]) == (mode == "eager")
        fired = [line["trigger"]["fired"] for line in mine]
        should = [line["trigger"]["should"] for line in mine]
        right = sum(f and s for f, s in zip(fired, should, strict=True))
        figures = row["trigger"]
        assert row["runs"] == 4
        assert (
            figures["fired_right"] + figures["fired_wrong"] + figures["missed"] + figures["held"]
            == 4
        )
        assert figures["fired_right"] == right
        assert figures["precision"] == (round(right / sum(fired), 4) if any(fired) else None)
        assert figures["recall"] == round(right / sum(should), 4)
        assert figures["accuracy"] == round(
            sum(f == s for f, s in zip(fired, should, strict=True)) / 4, 4
        )
