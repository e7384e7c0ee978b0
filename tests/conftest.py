"""Shared test setup: nothing may reach past the loopback interface; traces for the report."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from report_traces import make_traces

from orchestrator.models import close_connections
from orchestrator.security.signing import user_key
from orchestrator.testing import loopback_only

# Ray on Linux replaces a node address of 127.0.0.1 by the machine's network address (and so
# listens and connects there) unless its clusters are off: set before anything imports Ray, it
# keeps the tests' Ray, and the processes the tests start, on the loopback interface.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"


@pytest.fixture(scope="session", autouse=True)
def session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home folder for the whole session, so that fixtures made once (before any test's own
    home is set) never write into the real one. Its trace key signs every test's traces, as
    one user's key signs all their runs."""
    home = tmp_path_factory.mktemp("session-home")
    saved = {name: os.environ.get(name) for name in ("HOME", "XDG_CONFIG_HOME")}
    os.environ["HOME"], os.environ["XDG_CONFIG_HOME"] = str(home), str(home / ".config")
    user_key()  # made now, in the session's folder
    try:
        yield home
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(autouse=True)
def own_config_folder(
    session_home: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A user's own settings (the model alias file) never leak into a test; the user's trace
    key is the session's."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    shutil.copytree(session_home / ".config", home / ".config")
    return home / ".config"


@pytest.fixture(autouse=True)
def loopback_guard() -> Iterator[None]:
    """Refuse every outgoing connection that is not to 127.0.0.1, ::1 or localhost."""
    with loopback_only("tests"):
        yield


@pytest.fixture(autouse=True)
async def close_model_clients() -> AsyncIterator[None]:
    """Model adapters share one HTTP client per endpoint and event loop: close them after
    each test, whose event loop ends with it."""
    yield
    await close_connections()


@pytest.fixture(scope="session")
def report_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Traces of real runs for the report's tests (see report_traces.py), made once."""
    return make_traces(tmp_path_factory.mktemp("report-traces"))


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """One local Ray for the session: two CPUs, on 127.0.0.1, no dashboard, no statistics, no
    token (the tests' HOME changes); yields its address for processes the tests start."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
