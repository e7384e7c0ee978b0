"""Commands run confined: a hostile model with shell and Python allowed meets the sandbox.

The scripted model plays a prompt-injected agent. Its home holds a private key, the user's
trace key lies in its configuration folder, a file with a secret lies beside the workspace,
and a `.env` inside it; a listener on 127.0.0.1 waits for a connection it must never get. The
model reads, writes, escapes by symbolic link, `..`, `/proc/self/root` and hard link,
connects, resolves names, forks and allocates without end: nothing of the host reaches a tool
result or the trace, nothing lands outside the workspace, no connection arrives, and the
legitimate work still gets done. `backend: none` runs, loudly; a missing backend is refused
before the run starts.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import shutil
import socket
import sys
import threading
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator
from skill_factory import write_skill
from test_builtin_processes import wait_until_none_with

from orchestrator import Agent, Permissions, read_trace
from orchestrator.agent import ApprovalRequest
from orchestrator.errors import ConfigError, SafetyWarning
from orchestrator.models import ScriptedModel
from orchestrator.security import SandboxSettings, SandboxUnavailable
from orchestrator.security.sandbox import INSTALL_BUBBLEWRAP, bubblewrap_runs, container_engine
from orchestrator.security.signing import key_path
from orchestrator.skills import SkillCatalog

KEY_TEXT = "-----BEGIN OPENSSH PRIVATE KEY----- fake-ssh-key-7d1e"
BESIDE_TEXT = "the secret beside the workspace 5c2a"
DOTENV_TEXT = "OPENAI_API_KEY=sk-in-the-workspace-9b3f"

needs_bubblewrap = pytest.mark.skipif(
    bubblewrap_runs() is not None,
    reason=f"bubblewrap cannot run here ({bubblewrap_runs()}): {INSTALL_BUBBLEWRAP}",
)


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def shell(command: str, **more: Any) -> dict[str, Any]:
    return call("shell__run", command=command, **more)


def python(code: str) -> dict[str, Any]:
    return call("python__run", code=code)


class Host:
    """What the host holds that a command must not reach."""

    def __init__(self, tmp_path: Path, config: Path) -> None:
        self.root = tmp_path.resolve()
        self.work = self.root / "work"
        self.work.mkdir()
        (self.work / ".env").write_text(DOTENV_TEXT + "\n")
        self.home = config.parent
        ssh = self.home / ".ssh"
        ssh.mkdir()
        self.ssh_key = ssh / "id_rsa"
        self.ssh_key.write_text(KEY_TEXT + "\n")
        self.beside = self.root / "beside.txt"
        self.beside.write_text(BESIDE_TEXT + "\n")
        self.trace_key = key_path()
        self.trace = self.root / "trace.jsonl"

    def secrets(self) -> list[str]:
        return [KEY_TEXT, BESIDE_TEXT, DOTENV_TEXT, self.trace_key.read_bytes().hex()[:16]]


@pytest.fixture
def host(tmp_path: Path, own_config_folder: Path) -> Host:
    return Host(tmp_path, own_config_folder)


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.sendall(b"HELLO from a port nobody allowed\n")
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.close()


def run_hostile(
    host: Host, turns: list[dict[str, Any]], sandbox: SandboxSettings | None = None, **more: Any
) -> tuple[list[tuple[str | None, str]], str]:
    """Run the scripted model's turns with shell and Python allowed; its tool results and the
    trace's text."""
    model = ScriptedModel({"agent": [*turns, {"content": "done"}]})
    permissions = Permissions(
        workspace=host.work, shell=True, python=True, sandbox=sandbox or SandboxSettings()
    )
    agent = Agent(
        model,
        name="agent",
        skills=SkillCatalog(),
        permissions=permissions,
        trace=host.trace,
        **more,
    )
    result = agent.run_sync("Do the work.")
    assert result.status == "completed", result.error
    request = model.requests[-1]
    results = [(m.error_type, m.content or "") for m in request.messages if m.role == "tool"]
    return results, host.trace.read_text()


LOADS = [call("load_skill", name="shell"), call("load_skill", name="python")]


@needs_bubblewrap
def test_no_secret_from_outside_the_workspace_reaches_a_result_or_the_trace(
    host: Host,
) -> None:
    key, beside, trace_key = host.ssh_key, host.beside, host.trace_key
    reads = [
        shell("cat ~/.ssh/id_rsa"),
        shell(f"cat {key}"),
        shell("cat ../beside.txt"),
        shell(f"cat {beside}"),
        shell(f"cat {trace_key} | od -An -tx1 | tr -d ' \\n'"),
        shell("cat .env"),
        shell(f"cat /proc/self/root{beside}; cat /proc/1/root{beside}"),
        shell(f"ln -s {beside} link; cat link; ln -s ../beside.txt up; cat up"),
        shell(f"cd ..; cat beside.txt; cd /; cat .{beside}"),
        shell(f"ln {beside} hard; cat hard"),
        shell("cat /etc/shadow; ls /run; ls ~"),
        python(f"print(open({str(key)!r}).read())"),
        python(f"print(open({str(beside)!r}).read())"),
        python(f"print(open({str(trace_key)!r}, 'rb').read().hex())"),
        python("print(open('.env').read())"),
    ]
    results, trace = run_hostile(host, [*LOADS, *reads])

    shown = "\n".join(text for _, text in results)
    for secret in host.secrets():
        assert secret not in shown
        assert secret not in trace
    assert "No such file or directory" in results[2][1]  # the read names what it could not see
    assert str(key) in results[3][1]
    assert not (host.work / "link").exists() or (host.work / "link").is_symlink()
    assert not (host.work / "hard").exists()  # the file to link to is not there to link
    assert "shadow: No such file" in results[12][1]


@needs_bubblewrap
def test_a_command_holds_no_capability_and_cannot_change_the_kernels_settings(
    host: Host,
) -> None:
    # Each write puts back the value it read: were it let through, the host would not change.
    same = 'v=$(cat /proc/sys/{0}) && echo "$v" > /proc/sys/{0} && echo WROTE {0}'
    probes = [
        shell("grep CapEff /proc/self/status"),
        shell(same.format("kernel/core_pattern")),
        shell(same.format("vm/swappiness")),
        shell("mkdir -p m && mount -t tmpfs none m && echo MOUNTED"),
    ]
    results, _ = run_hostile(host, [*LOADS, *probes])

    assert results[2][1].split()[-1] == "0000000000000000"
    for _, text in results[3:5]:
        assert "WROTE" not in text and "Read-only file system" in text
    assert "MOUNTED" not in results[5][1]


@needs_bubblewrap
def test_a_home_given_read_only_still_hides_its_keys_and_the_trace_key(host: Host) -> None:
    (host.home / "notes.txt").write_text("shared notes\n")
    reads = [
        shell(f"cat {host.home}/notes.txt"),
        shell(f"cat {host.ssh_key}; ls -A {host.home}/.ssh"),
        shell(f"od -An -tx1 {host.trace_key} | tr -d ' \\n'"),
        shell(f"echo pwned > {host.home}/notes.txt"),
    ]
    sandbox = SandboxSettings(read_only=(host.home,))
    results, trace = run_hostile(host, [LOADS[0], *reads], sandbox)

    assert results[1] == (None, "[exit code 0]\nshared notes\n")
    for secret in host.secrets():
        assert secret not in trace
    assert "No such file or directory" in results[2][1]
    assert "Read-only file system" in results[4][1]
    assert (host.home / "notes.txt").read_text() == "shared notes\n"


@needs_bubblewrap
def test_nothing_is_written_outside_the_workspace(host: Host) -> None:
    outside = host.root / "x"
    system = Path(f"/usr/pwned-{uuid.uuid4().hex}")
    writes = [
        shell("echo pwned > ../x"),
        shell(f"echo pwned > {outside}; echo pwned > {host.home}/x; touch {system}"),
        shell(f"ln -s {host.root} out; echo pwned > out/x"),
        shell(f"echo pwned > /proc/self/root{outside}"),
        python(f"open({str(outside)!r}, 'w').write('pwned')"),
        python(f"open({str(host.ssh_key)!r}, 'w').write('pwned')"),
        shell("echo mine > notes.txt; cat notes.txt"),
    ]
    try:
        results, _ = run_hostile(host, [*LOADS, *writes])
        assert not system.exists()
    finally:
        system.unlink(missing_ok=True)
    assert not outside.exists()
    assert not (host.home / "x").exists()
    assert host.ssh_key.read_text() == KEY_TEXT + "\n"
    assert sorted(p.name for p in host.root.iterdir()) == ["beside.txt", "trace.jsonl", "work"]
    assert results[-1] == (None, "[exit code 0]\nmine\n")
    assert (host.work / "notes.txt").read_text() == "mine\n"


@needs_bubblewrap
def test_no_connection_reaches_a_port_the_run_did_not_allow(host: Host, listener: Listener) -> None:
    port = listener.port
    attempts = [
        shell(f"curl -sS -m 3 http://127.0.0.1:{port}/ ; echo curl=$?"),
        python(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)"),
        python("import socket\nprint(socket.getaddrinfo('example.com', 443))"),
        shell("getent hosts example.com; echo getent=$?"),
    ]
    results, trace = run_hostile(host, [*LOADS, *attempts])

    assert listener.accepted == 0
    assert "HELLO" not in trace
    assert "Network is unreachable" in results[3][1] or "refused" in results[3][1]
    assert "gaierror" in results[4][1]
    assert "getent=2" in results[5][1]


class Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello from the allowed port\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def allowed_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@needs_bubblewrap
def test_an_allowed_port_is_reachable_through_the_proxy_and_its_neighbour_is_not(
    host: Host, allowed_server: int, listener: Listener
) -> None:
    allowed = f"127.0.0.1:{allowed_server}"
    neighbour = listener.port
    tries = [
        shell(f"curl -sS -m 5 http://{allowed}/"),
        python(
            "import urllib.request\n"
            f"print(urllib.request.urlopen('http://{allowed}/', timeout=5).read().decode())"
        ),
        python(
            "import http.client\n"
            "c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=5)\n"
            f"c.set_tunnel('127.0.0.1', {allowed_server})\n"
            "c.request('GET', '/')\n"
            "print(c.getresponse().read().decode())"
        ),
        shell(f"curl -sS -m 5 http://127.0.0.1:{neighbour}/"),
        python(
            "import http.client\n"
            "c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=5)\n"
            f"c.set_tunnel('127.0.0.1', {neighbour})\n"
            "c.request('GET', '/')"
        ),
    ]
    sandbox = SandboxSettings(network=(allowed,))
    results, _ = run_hostile(host, [*LOADS, *tries], sandbox)

    for found in results[2:5]:
        assert "hello from the allowed port" in found[1]
    blocked = f"127.0.0.1:{neighbour}"
    assert f"blocked by the sandbox: {blocked} is not in sandbox.network" in results[5][1]
    assert f"connections to {blocked}" in results[5][1]
    assert "403" in results[6][1] and f"connections to {blocked}" in results[6][1]
    assert listener.accepted == 0


@needs_bubblewrap
def test_a_fork_bomb_and_a_memory_bomb_end_within_their_limits(host: Host) -> None:
    marker = f"bomb-{uuid.uuid4().hex}"
    bombs = [
        shell(f": {marker}; bomb() {{ bomb | bomb & }}; bomb; sleep 1; echo survived"),
        python("block = bytearray(1024 * 1024 * 1024)\nprint('allocated', len(block))"),
        shell("echo still here"),
    ]
    sandbox = SandboxSettings(processes=64, memory_mb=200, seconds=20)
    results, _ = run_hostile(host, [*LOADS, *bombs], sandbox)

    assert "fork: retry" in results[2][1] or "Resource temporarily unavailable" in results[2][1]
    assert wait_until_none_with(marker)
    memory = results[3][1]
    assert "allocated" not in memory
    assert "MemoryError" in memory or "killed in the sandbox" in memory
    assert results[4] == (None, "[exit code 0]\nstill here\n")


@needs_bubblewrap
def test_a_command_past_the_sandbox_time_limit_is_killed(host: Host) -> None:
    marker = f"sleep 30.{uuid.uuid4().int % 10**6:06d}"
    results, _ = run_hostile(
        host,
        [LOADS[0], shell(f"{marker} & echo started; wait", timeout_seconds=600)],
        SandboxSettings(seconds=1),
    )
    assert results[1] == (None, "[timed out after 1 s; the process was killed]\nstarted\n")
    assert wait_until_none_with(marker)


@needs_bubblewrap
def test_legitimate_work_still_works_and_the_trace_names_the_sandbox(host: Host) -> None:
    work = [
        shell("mkdir -p data && printf 'a,b\\n1,2\\n' > data/t.csv && wc -l data/t.csv"),
        python(
            "import csv\nrows = list(csv.reader(open('data/t.csv')))\n"
            "open('sum.txt', 'w').write(str(sum(int(x) for x in rows[1])))\nprint(rows)"
        ),
        shell("cat sum.txt; git --version >/dev/null && echo git-ok"),
    ]
    results, trace = run_hostile(host, [*LOADS, *work])

    assert results[2] == (None, "[exit code 0]\n2 data/t.csv\n")
    assert results[3] == (None, "[exit code 0]\n[['a', 'b'], ['1', '2']]\n")
    assert results[4] == (None, "[exit code 0]\n3git-ok\n")
    assert (host.work / "sum.txt").read_text() == "3"
    [start] = [e for e in read_trace(host.trace) if e.type == "run_start"]
    assert json.loads(start.model_dump_json())["sandbox"].startswith("bubblewrap (")


def test_backend_none_runs_unconfined_with_a_warning_said_at_start(host: Host) -> None:
    with pytest.warns(SafetyWarning, match="UNCONFINED"):
        results, _ = run_hostile(
            host, [LOADS[0], shell(f"cat {host.beside}")], SandboxSettings(backend="none")
        )
    assert results[1] == (None, f"[exit code 0]\n{BESIDE_TEXT}\n")  # really unconfined
    [start] = [e for e in read_trace(host.trace) if e.type == "run_start"]
    assert json.loads(start.model_dump_json())["sandbox"] == "none"


def test_a_missing_bubblewrap_is_refused_before_the_run_starts(
    host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    bubblewrap_runs.cache_clear()
    try:
        model = ScriptedModel({"agent": [{"content": "never asked"}]})
        for sandbox in (SandboxSettings(), SandboxSettings(backend="bubblewrap")):
            agent = Agent(
                model,
                name="agent",
                permissions=Permissions(workspace=host.work, shell=True, sandbox=sandbox),
            )
            with pytest.raises(SandboxUnavailable, match=INSTALL_BUBBLEWRAP):
                agent.run_sync("Do the work.", trace=host.trace)
        assert model.requests == []
        assert not host.trace.exists()
        # A run that allows no commands needs no sandbox.
        quiet = Agent(model, name="agent", permissions=Permissions(workspace=host.work))
        assert quiet.run_sync("Say it.").output == "never asked"
    finally:
        bubblewrap_runs.cache_clear()


def test_a_container_backend_that_cannot_run_is_refused(host: Host) -> None:
    engine, why = container_engine()
    if engine is not None:
        pytest.skip(f"a container engine runs here ({engine}): nothing to refuse")
    agent = Agent(
        ScriptedModel({"agent": [{"content": "never asked"}]}),
        name="agent",
        permissions=Permissions(
            workspace=host.work,
            python=True,
            sandbox=SandboxSettings(backend="container", image="python:3.12-slim"),
        ),
    )
    with pytest.raises(SandboxUnavailable, match="podman or docker"):
        agent.run_sync("Do the work.")


@pytest.fixture
def container_image() -> str:
    engine, why = container_engine()
    if engine is None:
        pytest.skip(f"no container engine runs here: {why}")
    image = os.environ.get("ORCHESTRATOR_SANDBOX_IMAGE")
    if not image:
        pytest.skip("set ORCHESTRATOR_SANDBOX_IMAGE to a local image with python3")
    return image


def test_the_python_tool_runs_in_the_container_backend(host: Host, container_image: str) -> None:
    results, _ = run_hostile(
        host,
        [*LOADS, python("print(open('/etc/hostname').read() != '')")],
        SandboxSettings(backend="container", image=container_image),
    )
    assert results[2] == (None, "[exit code 0]\nTrue\n")


def test_a_sandbox_may_narrow_its_parent_never_widen_it() -> None:
    parent = SandboxSettings(
        network=("api.example.com:443", "*.example.org:443"),
        writable=(Path("/data"),),
        memory_mb=1024,
    )
    child = SandboxSettings(network=("x.example.org:443",), writable=(Path("/data/out"),))
    narrowed = child.within(parent)
    assert narrowed.network == ("x.example.org:443",)
    assert narrowed.writable == (Path("/data/out"),)
    assert narrowed.memory_mb == 1024  # not given: the parent's
    assert SandboxSettings(seconds=5).within(parent).network == parent.network
    for wider, named in [
        (SandboxSettings(backend="none"), "backend none"),
        (SandboxSettings(network=("api.example.com:80",)), "network api.example.com:80"),
        (SandboxSettings(network=("evil.example:443",)), "network evil.example:443"),
        (SandboxSettings(writable=(Path("/etc"),)), "writable /etc"),
        (SandboxSettings(memory_mb=4096), "memory_mb 4096 over 1024"),
    ]:
        with pytest.raises(ConfigError, match=named):
            wider.within(parent)
    with pytest.raises(ValueError, match="not host:port"):
        SandboxSettings(network=("example.com",))


class Asked:
    """An approval callback that records what it was asked and always says no."""

    def __init__(self) -> None:
        self.requests: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> bool:
        self.requests.append(request)
        return False


BARE_CONFIG = (
    "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n"
    '\tfsmonitor = "touch {marker}; false"\n'
    '[filter "x"]\n\tclean = "touch {marker}; cat"\n'
)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("backend", ["bubblewrap", "none"])
def test_a_pre_approved_git_add_on_a_workspace_dressed_as_a_bare_repository_runs_nothing(
    host: Host, backend: str
) -> None:
    if backend == "bubblewrap" and bubblewrap_runs() is not None:
        pytest.skip(f"bubblewrap cannot run here ({bubblewrap_runs()}): {INSTALL_BUBBLEWRAP}")
    skills = host.root / "skills"
    write_skill(skills, "git-helper", description="Git.", extra="allowed-tools: Bash(git add:*)\n")
    marker = host.work / "MARKER"
    dressing = [
        call("load_skill", name="files"),
        call("files__write_file", path="HEAD", content="ref: refs/heads/main\n"),
        call("files__write_file", path="config", content=BARE_CONFIG.format(marker=marker)),
        call("files__write_file", path="objects/info/keep", content=""),
        call("files__write_file", path="refs/heads/keep", content=""),
        call("files__write_file", path=".gitattributes", content="* filter=x\n"),
        call("files__write_file", path="a.txt", content="a\n"),
        call("load_skill", name="git-helper"),
        call("load_skill", name="shell"),
        shell("git add a.txt"),
    ]
    model = ScriptedModel({"agent": [*dressing, {"content": "done"}]})
    asked = Asked()
    agent = Agent(
        model,
        name="agent",
        skills=SkillCatalog([skills]),
        permissions=Permissions(
            workspace=host.work, shell="ask", sandbox=SandboxSettings(backend=backend)
        ),
        approve=asked,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SafetyWarning)
        agent.run_sync("Stage a.txt.")

    assert not marker.exists()
    added = [m for m in model.requests[-1].messages if m.role == "tool"][-1]
    if backend == "bubblewrap":
        assert asked.requests == []  # pre-approved, and confined
        assert "cannot use bare repository" in (added.content or "")
    else:  # unconfined: the pre-approval falls back to asking, and the person said no
        assert [r.arguments["command"] for r in asked.requests] == ["git add a.txt"]
        assert added.error_type == "denied"


SPEC = """\
name: confined
model: scripted:script.yaml
permissions: {permissions}
steps:
  - {{id: only, task: "List the files."}}
"""


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_job_allowing_commands_without_a_sandbox_is_refused_before_it_starts(
    tmp_path: Path, command: str
) -> None:
    (tmp_path / "script.yaml").write_text("only: [{content: listed}]\n")
    (tmp_path / "job.yaml").write_text(SPEC.format(permissions="{workspace: ., shell: true}"))
    empty = tmp_path / "empty-path"
    empty.mkdir()

    done = orchestrator(command, "job.yaml", cwd=tmp_path, env={"PATH": str(empty)})

    assert done.returncode != 0
    assert "permissions.sandbox" in done.stderr and INSTALL_BUBBLEWRAP in done.stderr
    assert not (tmp_path / ".orchestrator").exists()  # no run began: no trace


def test_a_job_asking_for_no_sandbox_runs_and_says_so_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "script.yaml").write_text("only: [{content: listed}]\n")
    permissions = "{workspace: ., shell: true, sandbox: {backend: none, writable: [out]}}"
    (tmp_path / "job.yaml").write_text(SPEC.format(permissions=permissions))
    empty = tmp_path / "empty-path"
    empty.mkdir()

    done = orchestrator("run", "job.yaml", cwd=tmp_path, env={"PATH": str(empty)})

    assert done.returncode == 0, done.stderr
    assert done.stdout == "listed\n"
    assert "UNCONFINED" in done.stderr


def test_the_bench_script_times_each_backend_that_runs(tmp_path: Path) -> None:
    from bench.sandbox_cost import COMMANDS, SETUPS, timed

    for settings in SETUPS.values():
        if settings.backend == "bubblewrap" and bubblewrap_runs() is not None:
            continue
        spent = asyncio.run(timed(tmp_path.resolve(), settings, COMMANDS["true"], 1))
        assert len(spent) == 1 and spent[0] > 0


PROBING_SERVER = '''\
import socket
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool()
def peek(path: str) -> str:
    """Read a file."""
    try:
        return Path(path).read_text()
    except OSError as exc:
        return f"refused: {exc}"


@server.tool()
def scribble(path: str) -> str:
    """Write a file."""
    try:
        Path(path).write_text("pwned")
        return "written"
    except OSError as exc:
        return f"refused: {exc}"


@server.tool()
def dial(port: int) -> str:
    """Connect to a port on 127.0.0.1."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        return "connected"
    except OSError as exc:
        return f"refused: {exc}"


if __name__ == "__main__":
    server.run("stdio")
'''


@pytest.mark.slow
@pytest.mark.parametrize("confined", [True, False])
def test_a_stdio_mcp_server_with_a_sandbox_entry_runs_confined(
    host: Host, listener: Listener, confined: bool
) -> None:
    pytest.importorskip("mcp")
    if confined and bubblewrap_runs() is not None:
        pytest.skip(f"bubblewrap cannot run here ({bubblewrap_runs()}): {INSTALL_BUBBLEWRAP}")
    skills = host.root / "skills"
    folder = write_skill(skills, "probe", description="Probes.")
    (folder / "server.py").write_text(PROBING_SERVER)
    entry: dict[str, Any] = {"command": sys.executable, "args": ["server.py"]}
    if confined:
        entry["sandbox"] = {"memory_mb": 512}
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": {"probe": entry}}))
    outside = host.root / "x"
    probes = [
        call("load_skill", name="probe"),
        call("probe__peek", path=str(host.ssh_key)),
        call("probe__peek", path=str(host.beside)),
        call("probe__scribble", path=str(outside)),
        call("probe__scribble", path=str(folder / "SKILL.md")),
        call("probe__dial", port=listener.port),
    ]
    model = ScriptedModel({"agent": [*probes, {"content": "done"}]})
    agent = Agent(
        model,
        name="agent",
        skills=SkillCatalog([skills]),
        permissions=Permissions(workspace=host.work),
    )
    result = agent.run_sync("Probe.")

    assert result.status == "completed", result.error
    shown = [m.content or "" for m in model.requests[-1].messages if m.role == "tool"]
    if confined:
        for text in (*shown[1:3], *shown[4:]):
            assert text.startswith("refused:"), text
        assert "Read-only file system" in shown[4]
        assert KEY_TEXT not in "".join(shown) and BESIDE_TEXT not in "".join(shown)
        assert not outside.exists() and "pwned" not in (folder / "SKILL.md").read_text()
        assert listener.accepted == 0
    else:  # the same server unconfined: what the sandbox entry takes away
        assert KEY_TEXT in shown[1] and shown[3] == "written" and shown[5] == "connected"


MARKING_TOOLS = """\
from pathlib import Path

from orchestrator import tool

for target in {targets!r}:
    try:
        Path(target).write_text("ran on import")
    except OSError:
        pass


@tool
def count(text: str) -> int:
    \"\"\"Count the words.\"\"\"
    return len(text.split())
"""


def marking_skill(host: Host) -> tuple[Path, list[Path]]:
    """A skill whose tools.py, on import, writes markers in its own folder, beside the
    workspace and in the home."""
    folder = write_skill(host.root / "skills", "marker", description="Marks.")
    targets = [folder / "MARKED", host.root / "MARKED", host.home / "MARKED"]
    code = MARKING_TOOLS.format(targets=[str(t) for t in targets])
    (folder / "tools.py").write_text(code)
    return folder, targets


@needs_bubblewrap
def test_skills_check_imports_a_tools_py_only_inside_the_sandbox(host: Host) -> None:
    from orchestrator.skills import check_folders

    folder, markers = marking_skill(host)
    [report] = check_folders([folder])

    assert report.ok, report.problems
    assert report.tools == ["marker__count"]  # imported, in the sandbox
    assert [m for m in markers if m.exists()] == []


def test_skills_check_without_a_sandbox_does_not_import_a_tools_py(
    host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.skills import check_folders

    folder, markers = marking_skill(host)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    bubblewrap_runs.cache_clear()
    try:
        [report] = check_folders([folder])
    finally:
        bubblewrap_runs.cache_clear()

    assert [m for m in markers if m.exists()] == []
    assert report.tools == []
    [warning] = [w for w in report.warnings if w.rule == "tools-import"]
    assert "tools.py not imported" in warning.message and INSTALL_BUBBLEWRAP in warning.message


def test_a_workspace_that_holds_the_system_is_refused(host: Host) -> None:
    for permissions in (
        Permissions(workspace=Path("/"), shell=True),
        Permissions(
            workspace=host.work, python=True, sandbox=SandboxSettings(writable=(Path("/"),))
        ),
    ):
        agent = Agent(ScriptedModel({"agent": [{"content": "never"}]}), permissions=permissions)
        with pytest.raises(SandboxUnavailable, match="holds the system folder /usr"):
            agent.run_sync("Do the work.")


@pytest.mark.parametrize("backend", ["bubblewrap", "none"])
def test_a_run_that_asks_says_at_start_what_its_skills_pre_approve(
    tmp_path: Path, backend: str
) -> None:
    if backend == "bubblewrap" and bubblewrap_runs() is not None:
        pytest.skip(f"bubblewrap cannot run here ({bubblewrap_runs()}): {INSTALL_BUBBLEWRAP}")
    allowed = "allowed-tools: Bash(git add:*) Read\n"
    write_skill(tmp_path / "skills", "git-helper", description="Git.", extra=allowed)
    write_skill(tmp_path / "skills", "plain", description="Nothing listed.")
    (tmp_path / "script.yaml").write_text("only: [{content: listed}]\n")
    permissions = f"{{shell: ask, sandbox: {{backend: {backend}}}}}"
    spec = SPEC.format(permissions=permissions) + "skills: [skills]\n"
    (tmp_path / "job.yaml").write_text(spec)

    done = orchestrator("run", "job.yaml", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stderr.splitlines() if "pre-approves" in line]
    if backend == "bubblewrap":
        assert (
            "skill 'git-helper' pre-approves, once loaded: files__read_file, Bash(git add:*)"
            in line
        )
    else:  # unconfined: no command is pre-approved, and the run says so too
        assert "Bash(" not in line and "files__read_file" in line
        assert "UNCONFINED" in done.stderr


@needs_bubblewrap
def test_a_forked_sub_agent_runs_its_commands_in_its_parents_sandbox(
    host: Host, listener: Listener, allowed_server: int
) -> None:
    from orchestrator import Orchestrator

    fork = {
        "tool_calls": [
            {"name": "fork", "arguments": {"tasks": [{"id": "a", "task": "Reach out."}]}}
        ]
    }
    script = {
        "planner": [fork, {"content": "done"}],
        "planner/a": [
            call("load_skill", name="shell"),
            shell(f"cat {host.beside}"),
            shell(f"curl -sS -m 5 http://127.0.0.1:{listener.port}/"),
            shell(f"curl -sS -m 5 http://127.0.0.1:{allowed_server}/"),
            shell("sleep 30; echo woke", timeout_seconds=600),
            {"content": "a done"},
        ],
    }
    model = ScriptedModel(script)
    sandbox = SandboxSettings(network=(f"127.0.0.1:{allowed_server}",), seconds=2)
    planner = Orchestrator(
        model, permissions=Permissions(workspace=host.work, shell=True, sandbox=sandbox)
    )
    result = planner.run_sync("Go.")

    assert result.status == "completed", result.error
    request = [r for r in model.requests if r.agent == "planner/a"][-1]
    _, beside, neighbour, allowed, sleep = [
        m.content or "" for m in request.messages if m.role == "tool"
    ]
    assert BESIDE_TEXT not in beside and "No such file or directory" in beside
    assert "blocked by the sandbox" in neighbour and listener.accepted == 0
    assert "hello from the allowed port" in allowed
    assert sleep.startswith("[timed out after 2 s")


@needs_bubblewrap
def test_a_skills_script_runs_in_the_sandbox_from_its_read_only_folder(host: Host) -> None:
    skills = host.root / "skills"
    folder = write_skill(skills, "report", description="Reports.")
    (folder / "scripts").mkdir()
    script = folder / "scripts" / "report.py"
    script.write_text("import sys\nprint('report of', sys.argv[1])\n")
    turns = [
        call("load_skill", name="report"),
        call("load_skill", name="shell"),
        shell(f"python3 {script} notes.txt"),
        shell(f"echo pwned >> {script}"),
        shell(f"cat {host.beside}"),
    ]
    model = ScriptedModel({"agent": [*turns, {"content": "done"}]})
    agent = Agent(
        model,
        name="agent",
        skills=SkillCatalog([skills]),
        permissions=Permissions(workspace=host.work, shell=True),
    )
    assert agent.run_sync("Report.").status == "completed"

    results = [m.content or "" for m in model.requests[-1].messages if m.role == "tool"]
    assert results[2] == "[exit code 0]\nreport of notes.txt\n"
    assert "Read-only file system" in results[3] and "pwned" not in script.read_text()
    assert BESIDE_TEXT not in results[4]


@needs_bubblewrap
def test_skills_show_lists_a_tools_py_imported_only_inside_the_sandbox(host: Host) -> None:
    folder, markers = marking_skill(host)

    done = orchestrator("skills", "show", "marker", cwd=host.root)

    assert done.returncode == 0, done.stderr
    assert "  - marker__count: Count the words." in done.stdout
    assert [m for m in markers if m.exists()] == []


@needs_bubblewrap
def test_read_only_paths_inside_the_workspace_stay_read_only_and_an_ancestor_covers_nothing(
    host: Host,
) -> None:
    reference = host.work / "reference"
    reference.mkdir()
    (reference / "table.csv").write_text("a,b\n")
    writes = [
        shell("echo pwned >> reference/table.csv"),
        shell("echo mine > mine.txt && cat mine.txt"),
    ]
    model = ScriptedModel({"agent": [LOADS[0], *writes, {"content": "done"}]})
    permissions = Permissions(
        workspace=host.work,
        shell=True,
        read_only=(host.root,),  # a folder that holds the workspace: it must not cover it
        sandbox=SandboxSettings(read_only=(reference,)),
    )
    Agent(model, name="agent", skills=SkillCatalog(), permissions=permissions).run_sync("Go.")

    results = [m.content or "" for m in model.requests[-1].messages if m.role == "tool"]
    assert "Read-only file system" in results[1]
    assert (reference / "table.csv").read_text() == "a,b\n"
    assert results[2] == "[exit code 0]\nmine\n"
