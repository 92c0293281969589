"""A definition's stdio child, sandboxed when it says so: bubblewrap's arguments from its `Sandbox`, and the checks
that fail closed.

The child sees the system read-only (`--ro-bind / /`) with the places that hold secrets hidden under empty
`tmpfs` folders (every home folder, `/run`, `/tmp` and `/var/tmp`; in its project folder the gateway's state
folder `.agent-sdk/` and `.env` files; `Sandbox.hidden`, where the gateway adds its state root and key file), its cwd
read-only, then its grants: `readable` paths shown again read-only, `writable` ones bound read-write. New
user, PID, IPC, UTS, cgroup and (unless `network=True`) network namespaces; `--die-with-parent`;
`--new-session` (no TIOCSTI into the gateway's terminal); bwrap itself sets no-new-privileges and drops
every capability. Limits are rlimits set by util-linux's `prlimit` inside the sandbox (open files, address
space, processes); root ignores RLIMIT_NPROC, so a gateway running as root puts each child in a pids cgroup
of its own instead, and fails closed when it cannot make one.

When bwrap is missing or cannot make its namespaces, a sandboxed connection does not start (a sentence
says how to install or allow it): nothing runs unsandboxed by surprise. docs/connections.md holds the
threat model: what the sandbox stops, and what it does not.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import subprocess
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from .._exceptions import ConnectionUnavailable
from ..project._definitions import ConnectionDefinition
from ..project._sandbox import Sandbox
from ._transports._stdio import StdioChild, stdio_transport

__all__ = [
    "INSTALL_HINT",
    "SandboxUnavailable",
    "bwrap_argv",
    "hide_from_sandboxes",
    "sandbox_problem",
    "sandbox_unavailable",
    "sandboxed_command",
    "stdio_child",
]

logger = logging.getLogger(__name__)

INSTALL_HINT = (
    "install bubblewrap (`apt-get install bubblewrap` on Debian and Ubuntu, `dnf install bubblewrap` on Fedora)"
)
_NAMESPACE_HINT = (
    "allow unprivileged user namespaces (`sysctl -w kernel.unprivileged_userns_clone=1`; on Ubuntu 23.10 and "
    "later `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`), or in a container run the gateway with a "
    "seccomp profile that allows clone(CLONE_NEWUSER) (Docker: `--security-opt seccomp=unconfined`)"
)
_ROOT_NAMESPACE_HINT = (
    "the gateway runs as root without CAP_SYS_ADMIN (a container: `docker run --cap-add SYS_ADMIN "
    "--security-opt seccomp=unconfined`, or `--privileged`); or run it as an ordinary user and " + _NAMESPACE_HINT
)
_HIDDEN_DIRS = ("/home", "/root", "/run", "/tmp", "/var/tmp")
_HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow")
_PROJECT_SECRETS = (".agent-sdk",)
"""In the child's cwd: the gateway's default state folder (token stores, the state key, audit)."""
_CGROUP_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))
_ready: set[tuple[str, int]] = set()
"""(bwrap, euid) pairs whose namespaces were made once: a success is remembered, a failure checked again."""
_cgroups = itertools.count()


def bwrap_argv(
    sandbox: Sandbox,
    *,
    bwrap: str,
    prlimit: str,
    command: str,
    args: Iterable[str],
    cwd: str | None,
    home: str | None,
    path: str | None = None,
) -> list[str]:
    """bwrap's command line running `command args` in `sandbox` (paths absolute, as the loader leaves them)."""
    argv = [bwrap, *_namespaces(sandbox.network), "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    secret_dirs = [*_HIDDEN_DIRS, *([home] if home else [])]
    for folder in _existing(secret_dirs, Path.is_dir):
        argv += ["--tmpfs", folder]
    if cwd:
        argv += ["--ro-bind", cwd, cwd]
    for shown in runtime_paths(command, secret_dirs, path):  # resolved: bwrap cannot mount through a symlink
        argv += ["--ro-bind", shown, shown]
    for path in sandbox.readable:
        argv += ["--ro-bind", path, path]
    for path in sandbox.writable:
        argv += ["--bind", path, path]
    # Secrets last: a grant or the cwd that holds them shows them to nobody.
    in_project = [str(Path(cwd, name)) for name in _PROJECT_SECRETS] if cwd else []
    for folder in _existing([*in_project, *sandbox.hidden], Path.is_dir):
        argv += ["--tmpfs", folder, "--remount-ro", folder]
    env_files = sorted(str(p) for p in Path(cwd).glob(".env*") if p.is_file()) if cwd else []
    for file in _existing([*_HIDDEN_FILES, *env_files, *sandbox.hidden], Path.is_file):
        argv += ["--ro-bind", "/dev/null", file]
    if cwd:
        argv += ["--chdir", cwd]
    memory = sandbox.max_memory_mb * 1024 * 1024
    limits = [f"--nofile={sandbox.max_open_files}", f"--as={memory}"]
    if os.geteuid() != 0:  # root ignores RLIMIT_NPROC: its children get a pids cgroup (`sandboxed_command`)
        limits.append(f"--nproc={sandbox.max_processes}")
    return [*argv, "--", prlimit, *limits, "--", command, *args]


def runtime_paths(command: str, secret_dirs: Iterable[str], path: str | None = None) -> list[str]:
    """What the child's program needs to run, shown read-only even under a hidden folder: the installation (the
    folder above `bin/`) of the program and of its `#!` interpreter (`#!/usr/bin/env node`: `node` on `path`),
    and a Python venv's base interpreter
    (`pyvenv.cfg`'s `home`), e.g. `~/.pyenv/versions/3.11.7`. An installation that would show a whole home
    folder shows its one file instead. `command` is an absolute path (`sandboxed_command` resolves it)."""
    secret = [Path(d) for d in secret_dirs]
    found: list[str] = []
    pending = [Path(command)]
    while pending and len(found) < 8:
        program = pending.pop()
        for candidate in (program, program.resolve()):
            venv = candidate.parent.parent / "pyvenv.cfg"
            if candidate.parent.name == "bin" and venv.is_file():
                found.append(str(candidate.parent.parent.resolve()))
                home = _venv_home(venv)
                if home is not None:
                    pending.append(home / "python3")
        real = program.resolve()
        prefix = real.parent.parent if real.parent.name == "bin" else real.parent
        shows_secrets = any(d == prefix or d.is_relative_to(prefix) for d in secret)
        found.append(str(real if shows_secrets else prefix))
        interpreter = _shebang(real, path)
        if interpreter is not None and interpreter.is_absolute():
            pending.append(interpreter)
    return [p for i, p in enumerate(found) if Path(p).exists() and p not in found[:i]]


def _venv_home(cfg: Path) -> Path | None:
    with suppress(OSError, UnicodeDecodeError):
        for line in cfg.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                return Path(value.strip())
    return None


def _shebang(program: Path, path: str | None) -> Path | None:
    with suppress(OSError), program.open("rb") as file:
        head = file.read(256)
        if head.startswith(b"#!"):
            words = [os.fsdecode(w) for w in head[2:].split(b"\n", 1)[0].split()]
            if len(words) >= 2 and Path(words[0]).name == "env":
                named = [w for w in words[1:] if not w.startswith("-")]
                found = shutil.which(named[0], path=path) if named else None
                return Path(found) if found else None
            return Path(words[0]) if words else None
    return None


def _namespaces(network: bool) -> list[str]:
    flags = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if os.geteuid() != 0:  # an ordinary user's bwrap needs a user namespace to make the others
        flags.insert(0, "--unshare-user")
    return flags if network else [*flags, "--unshare-net"]


def _existing(paths: Iterable[str], kind: Any) -> list[str]:
    seen: list[str] = []
    for path in paths:
        resolved = str(Path(path).resolve())
        if resolved not in seen and kind(Path(resolved)) and not Path(path).is_symlink():
            seen.append(resolved)
    return seen


async def sandbox_problem(bwrap: str | None) -> str | None:
    """Why a sandboxed child cannot start here (a sentence with the fix), or None when bwrap works."""
    if bwrap is None:
        return f"the connection is sandboxed, but bubblewrap (bwrap) is not on the PATH: {INSTALL_HINT}"
    key = (bwrap, os.geteuid())
    if key in _ready:
        return None
    probe = [bwrap, *_namespaces(False), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "true"]
    try:
        result = await anyio.run_process(probe, check=False, stdin=subprocess.DEVNULL)
    except OSError as exc:
        return f"the connection is sandboxed, but bubblewrap cannot run ({exc.strerror}): {INSTALL_HINT}"
    if result.returncode != 0:
        said = result.stderr.decode(errors="replace").strip().splitlines()
        reason = f" (bwrap: {said[-1].removeprefix('bwrap: ')[:200]})" if said else ""
        hint = _ROOT_NAMESPACE_HINT if os.geteuid() == 0 else _NAMESPACE_HINT
        return f"the connection is sandboxed, but bubblewrap cannot create namespaces here{reason}: {hint}"
    _ready.add(key)
    return None


async def sandbox_unavailable(environ: Mapping[str, str]) -> str | None:
    """Why a sandboxed child of a gateway with this environment cannot start (a sentence), or None
    (`agent-sdk validate --online`)."""
    return await sandbox_problem(shutil.which("bwrap", path=environ.get("PATH", os.defpath)))


@asynccontextmanager
async def sandboxed_command(
    sandbox: Sandbox,
    command: str,
    args: list[str],
    *,
    cwd: str | None,
    environ: Mapping[str, str],
) -> AsyncGenerator[tuple[str, list[str]]]:
    """The command and arguments that start `command args` in `sandbox`; as root, its pids cgroup lives
    while the block does. Raises `SandboxUnavailable` (a sentence with the fix) when it cannot be sandboxed."""
    path = environ.get("PATH", os.defpath)
    bwrap = shutil.which("bwrap", path=path)
    problem = await sandbox_problem(bwrap)
    if problem is not None or bwrap is None:
        raise SandboxUnavailable(f"{problem}; it does not start unsandboxed")
    program = shutil.which(command, path=path) if "/" not in command else str(Path(cwd or ".", command))
    if program is None:
        raise SandboxUnavailable(f"the connection's command {command!r} is not on its PATH; give its full path")
    prlimit = shutil.which("prlimit", path=path)
    if prlimit is None:
        raise SandboxUnavailable(
            "the connection is sandboxed, but util-linux's prlimit is not on the PATH: install util-linux"
        )
    argv = bwrap_argv(
        sandbox, bwrap=bwrap, prlimit=prlimit, command=program, args=args, cwd=cwd, home=environ.get("HOME"), path=path
    )
    if os.geteuid() != 0:
        yield argv[0], argv[1:]
        return
    group = _make_cgroup(sandbox.max_processes)
    try:
        # Enter the cgroup before bwrap starts, so no process of the child is ever outside it.
        yield "/bin/sh", ["-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs"), *argv]
    finally:
        await _remove_cgroup(group)


@asynccontextmanager
async def stdio_child(
    defn: ConnectionDefinition,
    args: list[str],
    *,
    env: dict[str, str],
    on_spawn: Callable[[StdioChild], None],
    on_stderr: Callable[[str], None],
) -> AsyncGenerator[tuple[Any, Any]]:
    """The stdio transport of `defn`'s child (`args` expanded), under bubblewrap when `defn.sandboxed`.

    Raises `ConnectionUnavailable` with the fix when a sandboxed child cannot be sandboxed here."""
    assert defn.command is not None
    command, argv = defn.command, args
    async with AsyncExitStack() as stack:
        if (sandbox := defn.sandboxed) is not None:
            try:
                command, argv = await stack.enter_async_context(
                    sandboxed_command(sandbox, defn.command, args, cwd=defn.cwd, environ=env)
                )
            except SandboxUnavailable as exc:
                raise ConnectionUnavailable(defn.name, str(exc)) from None
        async with stdio_transport(
            command,
            argv,
            env=env,
            cwd=defn.cwd,
            errlog=None,
            on_spawn=on_spawn,
            max_message_bytes=defn.max_result_bytes,
            on_stderr=on_stderr,
        ) as streams:
            yield streams


class SandboxUnavailable(OSError):
    """A sandboxed child cannot be started here; the message says how to install or allow bubblewrap."""


def _make_cgroup(max_processes: int) -> Path:
    name = f"agent-sdk-{os.getpid()}-{next(_cgroups)}"
    for root in _CGROUP_ROOTS:
        group = root / name
        try:
            group.mkdir()
        except OSError:
            continue
        try:
            (group / "pids.max").write_text(f"{max_processes}\n")  # absent where no pids controller is enabled
        except OSError:
            with suppress(OSError):
                group.rmdir()
            continue
        return group
    raise SandboxUnavailable(
        "the connection is sandboxed and the gateway runs as root, which the kernel exempts from the process "
        "limit, and no pids cgroup can be made here (/sys/fs/cgroup/pids or a cgroup v2 folder with pids.max): "
        "run the gateway as an ordinary user, or give it a writable pids cgroup"
    )


async def _remove_cgroup(group: Path) -> None:
    with anyio.move_on_after(2.0):
        while True:
            try:
                os.rmdir(group)
                return
            except FileNotFoundError:
                return
            except OSError:  # its last processes are still being reaped
                await anyio.sleep(0.02)
    logger.warning("could not remove the sandbox cgroup %s (processes still in it)", group)


def hide_from_sandboxes(
    connections: Mapping[str, ConnectionDefinition], extra: tuple[str, ...]
) -> dict[str, ConnectionDefinition]:
    """The sandboxed ones of `connections`, each hiding `extra` (the gateway's state root and key file) and every
    other connection's writable grants, except a grant that holds, or lies in, its own grants, or holds its cwd."""
    changed: dict[str, ConnectionDefinition] = {}
    for name, defn in connections.items():
        if (sandbox := defn.sandboxed) is None:
            continue
        own = [Path(p) for p in (*sandbox.writable, *sandbox.readable)]
        cwd = Path(defn.cwd) if defn.cwd else None
        others = [
            p
            for other, d in connections.items()
            if other != name and (s := d.sandboxed) is not None
            for p in s.writable
            if not any(Path(p).is_relative_to(o) or o.is_relative_to(p) for o in own)
            and not (cwd is not None and cwd.is_relative_to(p))  # hiding it would hide the child's own cwd
        ]
        hidden = tuple(dict.fromkeys((*sandbox.hidden, *extra, *others)))
        changed[name] = replace(defn, sandbox=replace(sandbox, hidden=hidden))
    return changed
