"""Commands run confined: the sandbox the shell and python tools' processes run in.

A run's permissions name the sandbox (`Permissions(sandbox=SandboxSettings(...))`, or
`permissions: {sandbox: {...}}` in a spec); `command_sandbox` resolves it for a run, and
`sandbox_at_start` refuses a run whose sandbox cannot run here. Three backends:

- `bubblewrap` (the default where `bwrap` is on PATH): the command sees the workspace
  read-write at its own path, a fixed list of system folders read-only, an empty home and
  `/tmp`, its own PID, IPC, UTS and network namespaces, and nothing else of the machine;
- `container`: `podman` or `docker` runs the command in the image the settings name, the
  workspace mounted at its own path, no network;
- `none`: the command runs as the user, with everything the user can reach; only when
  asked for, and said loudly at the start of the run.

Limits: `seconds` caps a command's time (its whole process tree is killed); `processes` and
`memory_mb` are set through the cgroup `pids` and `memory` controllers where this process may
write them, else as rlimits (`ulimit -u`, `ulimit -v`), which do not bind root for processes.
Network: none, unless `network` lists `host:port` entries; those are reached through an HTTP
proxy outside the sandbox (CONNECT, or a plain request with an absolute URL), which checks each
request against the list and refuses everything else. Inside, the proxy is at
`127.0.0.1:3128` (the usual proxy variables point there): a small forwarder passes each
connection on to the proxy's unix socket, bound into the sandbox. There is no DNS inside.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .inventory import DOTENV_FILES, reads_no_configuration, user_config_folder
from .permissions import Backend, Permissions, SandboxSettings, SandboxUnavailable, under

INSTALL_BUBBLEWRAP = "apt-get install bubblewrap"
PROXY_PORT = 3128
PROXY_FOLDER = "/.orchestrator-proxy"
HOME_INSIDE = "/home/sandbox"
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Read-only inside (a symbolic link such as `/bin -> usr/bin` is made again as one)."""
SYSTEM_FILES = (
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/ssl/certs",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/mime.types",
    "/etc/protocols",
    "/etc/services",
    "/etc/bash.bashrc",
    "/etc/profile",
    "/etc/inputrc",
    "/etc/python3",
    "/etc/magic",
)
"""What of /etc a command may read: no shadow file, no host keys, no resolver, no gitconfig."""
PROC_READ_ONLY = tuple(
    arg for name in ("/proc/sys", "/proc/irq", "/proc/bus") for arg in ("--ro-bind-try", name, name)
)
"""The kernel settings under the sandbox's /proc, bound read-only over it."""
GIT_SAFETY = {
    "safe.bareRepository": "explicit",
    "core.fsmonitor": "",
    "core.hooksPath": "/dev/null",
}
"""Git run by a command never takes a bare repository it was not pointed at (a model could
dress the workspace as one), never runs the workspace's hooks nor an fsmonitor command."""
MASK_SCAN_LIMIT = 20_000
"""How many entries of each mounted folder are looked at for files of keys to hide."""
HOME_SECRETS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".netrc", ".pgpass")
"""Where keys live in a home folder: hidden when a folder mounted for a command holds them."""


# --- which backend can run ------------------------------------------------------------------


@cache
def bubblewrap_runs() -> str | None:
    """None when `bwrap` can make a sandbox here, else why not."""
    found = shutil.which("bwrap")
    if found is None:
        return "bwrap is not on PATH"
    probe = [
        found,
        "--ro-bind",
        "/",
        "/",
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
    ]
    probe.append("true")
    try:
        done = subprocess.run(probe, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run ({exc})"
    if done.returncode != 0:
        return f"bwrap cannot make namespaces here: {done.stderr.decode(errors='replace')}"
    return None


@cache
def container_engine() -> tuple[str | None, str]:
    """The container engine that answers here (podman, else docker), or None and why."""
    tried: list[str] = []
    for engine in ("podman", "docker"):
        found = shutil.which(engine)
        if found is None:
            tried.append(f"{engine} is not on PATH")
            continue
        try:
            done = subprocess.run([found, "info"], capture_output=True, timeout=20, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            tried.append(f"{engine} info failed ({exc})")
            continue
        if done.returncode == 0:
            return found, engine
        tried.append(f"{engine} info failed: {done.stderr.decode(errors='replace').strip()}")
    return None, "; ".join(tried)


def resolve_backend(settings: SandboxSettings) -> Backend:
    """The backend commands will run in, or SandboxUnavailable saying how to get one."""
    if settings.backend == "none":
        return "none"
    if settings.backend == "container":
        engine, why = container_engine()
        if engine is None:
            raise SandboxUnavailable(
                f"sandbox backend container needs podman or docker that runs ({why}); "
                f"or use bubblewrap ({INSTALL_BUBBLEWRAP})"
            )
        if not settings.image:
            raise SandboxUnavailable("sandbox backend container needs an image (sandbox.image)")
        if settings.network:
            raise SandboxUnavailable(
                "sandbox.network is not available with the container backend; use bubblewrap"
            )
        return "container"
    failure = bubblewrap_runs()
    if failure is None:
        return "bubblewrap"
    asked = (
        "this run asks for the bubblewrap sandbox"
        if settings.backend
        else ("this run allows commands (shell or python), which run in a sandbox")
    )
    raise SandboxUnavailable(
        f"{asked}, and bubblewrap cannot run here ({failure.strip()}). Install it "
        f"({INSTALL_BUBBLEWRAP}), or name another backend (sandbox: {{backend: container, "
        "image: ...}}), or run commands unconfined (sandbox: {backend: none})."
    )


def command_sandbox(permissions: Permissions) -> Sandbox:
    """The sandbox a run's commands start in; SandboxUnavailable (a ConfigError) when its
    backend cannot run here."""
    return _run_sandbox(permissions, permissions.workspace_root())


def _run_sandbox(permissions: Permissions, workspace: Path) -> Sandbox:
    backend = resolve_backend(permissions.sandbox)
    for path in (workspace, *permissions.sandbox.writable) if backend != "none" else ():
        holds = [name for name in SYSTEM_FOLDERS if under(Path(name), path.resolve())]
        if holds:
            raise SandboxUnavailable(
                f"the sandbox cannot confine commands to {path}: it holds the system folder "
                f"{holds[0]}; give the run a workspace (and writable paths) of their own"
            )
    return Sandbox(
        backend,
        permissions.sandbox,
        workspace,
        protected=permissions.read_only,
        secret_files=permissions.secret_files,
    )


def server_sandbox(settings: SandboxSettings, folder: Path, scratch: Path) -> Sandbox:
    """The sandbox of a stdio MCP server whose entry asks for one: `folder` (its working
    folder) mounted read-only, `scratch` (an empty folder of its own) writable, with the
    settings' own paths and network."""
    backend = resolve_backend(settings)
    return Sandbox(backend, settings, scratch.resolve(), protected=(folder.resolve(),))


def sandbox_at_start(permissions: Permissions) -> str | None:
    """What a run says at its start of where its commands run: None when it allows no
    commands, else the sandbox and its limits. Raises SandboxUnavailable (before the run
    starts) when the sandbox it asks for, or the default one, cannot run here."""
    if not permissions.allows_commands():
        return None
    # Checked, not made: a missing `work/` folder is made by the first command that runs.
    workspace = permissions.workspace.expanduser().resolve()
    return _run_sandbox(permissions, workspace).describe()


def sandbox_refusal(permissions: Permissions) -> str | None:
    """Why a run with `permissions` would be refused at its start for its sandbox (it allows
    commands and the sandbox cannot run here), None when it would not."""
    try:
        sandbox_at_start(permissions)
    except SandboxUnavailable as exc:
        return str(exc)
    return None


# --- limits ---------------------------------------------------------------------------------


@dataclass
class _Cgroups:
    """The cgroups of one command (v1 or v2), made where this process may write them."""

    folders: list[Path] = field(default_factory=list)
    bound: set[str] = field(default_factory=set)
    """The limits a cgroup holds: `pids`, `memory`."""

    @classmethod
    def made(cls, settings: SandboxSettings) -> _Cgroups:
        made = cls()
        name = f"orchestrator-sandbox-{uuid.uuid4().hex[:12]}"
        limits = {
            "pids": ("pids.max", str(settings.processes)),
            "memory": (
                "memory.max" if _cgroup_v2() else "memory.limit_in_bytes",
                str(settings.memory_mb * 1024 * 1024),
            ),
        }
        for controller, (limit_file, value) in limits.items():
            parent = _own_cgroup(controller)
            if parent is None:
                continue
            folder = parent / name
            try:
                folder.mkdir()
            except OSError:
                continue
            try:
                (folder / limit_file).write_text(value)
                if controller == "memory" and not _cgroup_v2():
                    swap = folder / "memory.memsw.limit_in_bytes"
                    with contextlib.suppress(OSError):
                        swap.write_text(value)
            except OSError:
                with contextlib.suppress(OSError):
                    folder.rmdir()
                continue
            made.folders.append(folder)
            made.bound.add(controller)
        return made

    def joining(self) -> str:
        """Shell lines that move the shell itself into each cgroup."""
        return "".join(
            f"echo $$ > {shlex.quote(str(f / 'cgroup.procs'))} && " for f in self.folders
        )

    @reads_no_configuration("a cgroup's own list of processes, to end them")
    def end(self) -> None:
        """Kill what is left in the cgroups and remove them."""
        for folder in self.folders:
            for _ in range(50):
                try:
                    pids = (folder / "cgroup.procs").read_text().split()
                except OSError:
                    break
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
                        os.kill(int(pid), signal.SIGKILL)
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


@cache
def _cgroup_limits_here() -> frozenset[str]:
    """The limits a command's cgroup can hold in this process (`pids`, `memory`): found once,
    by making a cgroup and removing it, so a run's start (and each sub-agent's) makes none."""
    probe = _Cgroups.made(SandboxSettings())
    probe.end()
    return frozenset(probe.bound)


@cache
def _cgroup_v2() -> bool:
    return Path("/sys/fs/cgroup/cgroup.controllers").exists()


@cache
@reads_no_configuration("the kernel's note of which cgroups this process is in")
def _own_cgroup(controller: str) -> Path | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if _cgroup_v2() and controllers == "":
            folder = Path("/sys/fs/cgroup") / path.lstrip("/")
            enabled = folder / "cgroup.subtree_control"
            try:
                if controller not in enabled.read_text().split():
                    return None
            except OSError:
                return None
            return folder
        if controller in controllers.split(","):
            folder = Path("/sys/fs/cgroup") / controllers / path.lstrip("/")
            return folder if folder.is_dir() else None
    return None


# --- the network proxy ----------------------------------------------------------------------


class EgressProxy:
    """An HTTP proxy on a unix socket that lets through only the allowed `host:port`."""

    def __init__(self, settings: SandboxSettings, folder: Path) -> None:
        self.settings = settings
        self.socket = folder / "proxy.sock"
        self.refused: list[str] = []
        self._server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> EgressProxy:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(30):
                head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            writer.close()
            return
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        method, _, rest = line.partition(" ")
        target, _, version = rest.rpartition(" ")
        tunnel = method.upper() == "CONNECT"
        host, port, forwarded = _destination(method, target, version, head, tunnel)
        if host is None or not self.settings.allows(host, port):
            where = f"{host}:{port}" if host else repr(target)
            self.refused.append(where)
            allowed = ", ".join(self.settings.network)
            body = f"blocked by the sandbox: {where} is not in sandbox.network ({allowed})\n"
            writer.write(
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
            )
            await _close(writer)
            return
        try:
            async with asyncio.timeout(30):
                up_reader, up_writer = await asyncio.open_connection(host, port)
        except (OSError, TimeoutError) as exc:
            writer.write(f"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n{exc}\n".encode())
            await _close(writer)
            return
        if tunnel:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(forwarded)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


def _destination(
    method: str, target: str, version: str, head: bytes, tunnel: bool
) -> tuple[str | None, int, bytes]:
    """Host, port and the request to send on, for a CONNECT or an absolute-URL request."""
    if tunnel:
        host, _, port = target.rpartition(":")
        return (host or None), int(port) if port.isdigit() else 0, b""
    scheme, sep, after = target.partition("://")
    if not sep or scheme.lower() != "http":
        return None, 0, b""
    authority, slash, path = after.partition("/")
    host, colon, port = authority.rpartition(":")
    if not colon or not port.isdigit():
        host, port = authority, "80"
    rest = head.split(b"\r\n", 1)[1] if b"\r\n" in head else b""
    request = f"{method} {slash}{path} {version}\r\n".encode("latin-1") + rest
    return (host or None), int(port), request


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65_536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        await _close(writer)


async def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        await writer.drain()
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()


FORWARDER = """
import os, socket, sys, threading
port, path = int(sys.argv[1]), sys.argv[2]
listener = socket.socket()
listener.bind(("127.0.0.1", port))
listener.listen(64)
def pipe(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve(conn):
    up = socket.socket(socket.AF_UNIX)
    try:
        up.connect(path)
    except OSError:
        conn.close()
        return
    threading.Thread(target=pipe, args=(conn, up), daemon=True).start()
    pipe(up, conn)
if os.fork() == 0:
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
listener.close()
os.execvp(sys.argv[3], sys.argv[3:])
"""
"""Inside the sandbox: listen on 127.0.0.1:PORT, pass each connection to the proxy's socket,
and run the command (the listener is ready before it starts)."""


# --- the sandbox of a run -------------------------------------------------------------------


@dataclass(frozen=True)
class Launch:
    """How to start one confined command: its argv and environment."""

    argv: list[str]
    env: dict[str, str]
    refused: list[str] = field(default_factory=list)
    """What the network proxy refused while the command ran (`host:port`)."""


@dataclass(frozen=True)
class Sandbox:
    """The sandbox a run's commands start in."""

    backend: Backend
    settings: SandboxSettings
    workspace: Path
    protected: tuple[Path, ...] = ()
    """Paths the file tools may not write (the run's spec, skill folders, trace): mounted
    read-only inside, so a skill's scripts run there."""
    secret_files: tuple[str, ...] = DOTENV_FILES
    """File-name patterns of files that hold keys (`Permissions.secret_files`): hidden in
    every folder mounted for a command."""

    def python(self) -> str:
        """The Python interpreter a command runs Python with, as seen inside."""
        return "python3" if self.backend == "container" else sys.executable

    def timeout(self, asked: float) -> float:
        """A command's time limit: what the tool asked, within `seconds`."""
        return min(asked, self.settings.seconds)

    @contextlib.asynccontextmanager
    async def launch(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        read_only: Sequence[Path] = (),
    ) -> AsyncIterator[Launch]:
        """Start `argv` confined: yields the argv and environment to start, and on leaving
        ends what the command left behind (its cgroups, the proxy). `read_only`: more paths
        this one command reads (a script written outside the workspace)."""
        env = {**env, **git_safety()}
        if self.backend == "none":
            yield Launch(list(argv), env)
            return
        if self.backend == "container":
            yield Launch(self._container(argv, cwd, env, read_only), {"PATH": os.defpath})
            return
        with tempfile.TemporaryDirectory(prefix="orchestrator-sandbox-") as scratch:
            cgroups = _Cgroups.made(self.settings)
            try:
                if self.settings.network:
                    async with EgressProxy(self.settings, Path(scratch)) as proxy:
                        yield self._bubblewrap(argv, cwd, env, read_only, cgroups, proxy)
                else:
                    yield self._bubblewrap(argv, cwd, env, read_only, cgroups, None)
            finally:
                cgroups.end()

    def _bubblewrap(
        self,
        argv: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        read_only: Sequence[Path],
        cgroups: _Cgroups,
        proxy: EgressProxy | None,
    ) -> Launch:
        bwrap = shutil.which("bwrap") or "bwrap"
        # Run by root, bwrap keeps every capability unless told; and root may write the
        # kernel's settings under /proc (core_pattern runs a program on the host).
        args = [bwrap, "--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session"]
        args += ["--proc", "/proc", *PROC_READ_ONLY, "--dev", "/dev"]
        args += ["--tmpfs", "/tmp", "--tmpfs", HOME_INSIDE]
        args += _system_mounts()
        writable = (self.workspace, *self.settings.writable)
        for path in writable:
            args += ["--bind", str(path), str(path)]
        # Read-only after the writable ones, so that what lies inside a writable folder (the
        # run's own Python, a skill folder, the trace) stays read-only; never a folder that
        # holds a writable one, which would cover it.
        mounted = (*_interpreter_folders(), *self.settings.read_only, *read_only, *self.protected)
        mounted = tuple(p for p in mounted if not any(under(w, p) for w in writable))
        for path in mounted:
            args += ["--ro-bind-try", str(path), str(path)]
        for path in _hidden((*writable, *mounted), self.secret_files):
            args += (
                ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
            )
        args += ["--chdir", str(cwd)]
        inner_env = {**env, "HOME": HOME_INSIDE, "TMPDIR": "/tmp"}
        command = list(argv)
        refused: list[str] = proxy.refused if proxy is not None else []
        if proxy is not None:
            args += ["--ro-bind", str(proxy.socket.parent), PROXY_FOLDER]
            address = f"http://127.0.0.1:{PROXY_PORT}"
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
                inner_env[name] = inner_env[name.lower()] = address
            inner_env["NO_PROXY"] = inner_env["no_proxy"] = ""
            socket_inside = f"{PROXY_FOLDER}/{proxy.socket.name}"
            command = [sys.executable, "-S", "-c", FORWARDER, str(PROXY_PORT), socket_inside]
            command += list(argv)
        args += ["--remount-ro", "/", "--", *command]  # no writes but to the mounts
        limits = "ulimit -c 0; "
        if "memory" not in cgroups.bound:
            limits += f"ulimit -v {self.settings.memory_mb * 1024} 2>/dev/null; "
        if "pids" not in cgroups.bound:
            limits += f"ulimit -u {self.settings.processes} 2>/dev/null; "
        script = f'{cgroups.joining()}{limits}exec "$@"'
        return Launch(["/bin/sh", "-c", script, "sandbox", *args], inner_env, refused)

    def _container(
        self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], read_only: Sequence[Path]
    ) -> list[str]:
        engine, _ = container_engine()
        args = [engine or "docker", "run", "--rm", "-i", "--network", "none", "--read-only"]
        args += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
        args += ["--memory", f"{self.settings.memory_mb}m", "--pids-limit"]
        args += [str(self.settings.processes), "--tmpfs", "/tmp", "--tmpfs", HOME_INSIDE]
        args += ["-e", f"HOME={HOME_INSIDE}", "-w", str(cwd)]
        for name in ("PYTHONIOENCODING", "PYTHONUNBUFFERED", *GIT_ENV_NAMES):
            if name in env:
                args += ["-e", f"{name}={env[name]}"]
        args += ["-v", f"{self.workspace}:{self.workspace}"]
        for path in self.settings.writable:
            args += ["-v", f"{path}:{path}"]
        for path in (*self.settings.read_only, *read_only):
            args += ["-v", f"{path}:{path}:ro"]
        writable = (self.workspace, *self.settings.writable)
        inside = [p for p in self.protected if any(under(p, w) for w in writable) and p.exists()]
        for path in inside:
            args += ["-v", f"{path}:{path}:ro"]
        mounted = (*writable, *self.settings.read_only, *read_only, *inside)
        for path in _hidden(mounted, self.secret_files):
            args += ["--tmpfs", str(path)] if path.is_dir() else ["-v", f"/dev/null:{path}:ro"]
        return [*args, self.settings.image or "", *argv]

    def limits(self) -> str:
        """The backend and its limits, in words a command's result shows."""
        s = self.settings
        return f"{self.backend}; {s.memory_mb} MiB, {s.processes} processes, {s.seconds:g} s"

    def describe(self) -> str:
        """The backend and where its limits hold, for the run's start."""
        if self.backend != "bubblewrap":
            return self.backend
        held = _cgroup_limits_here()
        how = {name: "cgroup" if name in held else "rlimit" for name in ("pids", "memory")}
        return (
            f"bubblewrap (processes: {how['pids']}, memory: {how['memory']}, "
            f"network: {', '.join(self.settings.network) or 'none'})"
        )


GIT_ENV_NAMES = (
    "GIT_CONFIG_COUNT",
    *(f"GIT_CONFIG_{kind}_{i}" for i in range(len(GIT_SAFETY)) for kind in ("KEY", "VALUE")),
)


def git_safety() -> dict[str, str]:
    """The environment that makes git take `GIT_SAFETY` over any repository's configuration."""
    env = {"GIT_CONFIG_COUNT": str(len(GIT_SAFETY))}
    for index, (key, value) in enumerate(GIT_SAFETY.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


@cache
def _system_mounts() -> tuple[str, ...]:
    args: list[str] = []
    for name in (*SYSTEM_FOLDERS, *SYSTEM_FILES):
        path = Path(name)
        if path.is_symlink() and name in SYSTEM_FOLDERS:
            args += ["--symlink", str(path.readlink()), name]
        elif path.exists():
            args += ["--ro-bind", name, name]
    return tuple(args)


@cache
def _interpreter_folders() -> tuple[Path, ...]:
    """The folders of this Python installation outside the system folders (a pyenv or venv
    Python), so that the python tool's interpreter runs inside."""
    found: list[Path] = []
    for folder in (sys.base_prefix, sys.prefix, str(Path(sys.executable).resolve().parent.parent)):
        path = Path(folder).resolve()
        if not any(under(path, Path(s)) for s in SYSTEM_FOLDERS) and path not in found:
            found.append(path)
    return tuple(found)


def _hidden(mounted: Iterable[Path], secret_files: Sequence[str] = DOTENV_FILES) -> list[Path]:
    """What a command must not see in the folders mounted for it (writable and read-only
    alike): the user's configuration folder (the trace key) and a home folder's keys
    wherever they lie under one, and every file whose name matches `secret_files` (`.env`,
    and what the permissions add), up to `MASK_SCAN_LIMIT` entries of each folder (the
    Python installation is not searched)."""
    hidden: list[Path] = []
    home = Path.home()
    keys = [user_config_folder().resolve(), *(home / name for name in HOME_SECRETS)]
    roots = list(dict.fromkeys(mounted))

    def holds_keys(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in secret_files)

    for root in roots:
        hidden += [path for path in keys if under(path, root) and path.exists()]
        if root.is_file() and holds_keys(root.name):
            hidden.append(root)
        if root in _interpreter_folders():
            continue
        seen = 0  # each folder its own count: a workspace filled by a command hides no other
        for folder, folders, files in os.walk(root):
            seen += len(folders) + len(files)
            folders[:] = [f for f in folders if f not in (".git", "node_modules", ".venv")]
            # A link is judged by what it points at, as the file tools judge it; covering
            # one whose target is not mounted would stop the sandbox from starting.
            found = (Path(folder) / name for name in files if holds_keys(name))
            hidden += [path for path in found if not path.is_symlink()]
            if seen > MASK_SCAN_LIMIT:
                break
    return list(dict.fromkeys(hidden))
