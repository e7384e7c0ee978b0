"""A small eval against the real server and model: the disclosure A/B of the word-count job.

A 135M model's scores are not the point: the eval's machinery is (every run ends with a line,
every request reaches the server and is answered, the table is printed, each mode's tools
array is what it says). The table it prints is the one docs/eval.md shows.
"""

from __future__ import annotations

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
