"""A stdio connection's sandbox as its definition states it (`sandbox=`), and the project's default.

`sandbox=True`, a `Sandbox(...)` or a dict of its fields runs the child under bubblewrap with the grants
it names (`connections/client/_sandbox.py` turns them into bwrap's arguments); `sandbox=False` never does;
leaving it out takes the project's default, `agent/sandbox.toml` with `stdio = true` (docs/connections.md,
"Sandboxed stdio servers").
"""

# Definition files are untyped user code: the runtime isinstance checks on typed parameters are the point.
# pyright: reportUnnecessaryIsInstance=false, reportUnnecessaryComparison=false

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from ._diagnostics import Diagnostic
from ._problems import Problem

__all__ = ["SANDBOX_FILE", "Sandbox", "project_sandbox_default", "sandbox_value"]

SANDBOX_FILE = Path("agent") / "sandbox.toml"
"""The project's sandbox default, relative to the project folder."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """What a sandboxed stdio child is granted beyond a read-only system, a private `/tmp` and its cwd."""

    writable: tuple[str, ...] = ()
    """Paths the child may write (a relative one is relative to the project folder; `~` is the gateway's home)."""
    readable: tuple[str, ...] = ()
    """Paths under a hidden area (the home folders, `/run`) shown read-only, e.g. a package runner's install."""
    hidden: tuple[str, ...] = ()
    """Paths the child must not see even where the system or a grant shows them (`serve` adds its state root
    and state key file to every sandbox)."""
    network: bool = False
    """Reach the network (the gateway's own: loopback included); off, the child has no interface but its own `lo`."""
    max_processes: int = 64
    """Processes and threads the child may run at once (its own and its children's)."""
    max_open_files: int = 1024
    """Open file descriptors per process."""
    max_memory_mb: int = 8192
    """Address space per process, in MiB (Node.js reserves several GiB of it up front: keep it generous)."""

    def describe(self) -> str:
        """One line for `agent-sdk info` and `validate --online`: what the child is granted."""
        parts = [f"network={'on' if self.network else 'off'}"]
        if self.writable:
            parts.append(f"writable={','.join(self.writable)}")
        if self.readable:
            parts.append(f"readable={','.join(self.readable)}")
        parts.append(f"processes<={self.max_processes} files<={self.max_open_files} memory<={self.max_memory_mb}MiB")
        return "bubblewrap: " + " ".join(parts)


_LIMITS = ("max_processes", "max_open_files", "max_memory_mb")
_CAMEL = {"maxProcesses": "max_processes", "maxOpenFiles": "max_open_files", "maxMemoryMb": "max_memory_mb"}
_KNOWN = tuple(f.name for f in fields(Sandbox))


def sandbox_value(value: object, problems: list[Problem]) -> Sandbox | bool | None:
    """`sandbox=` as given: None (the project decides), False, or the `Sandbox` it grants; a bad value is a problem
    (and None: the project's default, never a silent `False`)."""
    if value is None or value is False:
        return value
    if value is True:
        return Sandbox()
    if isinstance(value, Sandbox):
        problems.extend(_limit_problems(value))
        return value
    if not isinstance(value, Mapping):
        problems.append(
            Problem(
                "bad-field-type",
                f"field 'sandbox' must be True, False, a Sandbox(...) or a dict of {', '.join(_KNOWN)}; "
                f"got {type(value).__name__}",
            )
        )
        return None
    given = {_CAMEL.get(str(k), str(k)): v for k, v in value.items()}
    unknown = sorted(set(given) - set(_KNOWN))
    if unknown:
        known = ", ".join(_KNOWN)
        problems.append(Problem("unknown-field", f"unknown sandbox field {unknown[0]!r}; sandbox takes {known}"))
        return None
    clean: dict[str, object] = {}
    for key in ("writable", "readable", "hidden"):
        if key in given:
            paths = given[key]
            listed = isinstance(paths, list | tuple) and all(isinstance(p, str | Path) for p in paths)
            if isinstance(paths, str) or not listed:
                problems.append(Problem("bad-field-type", f"sandbox {key!r} must be a list of paths"))
                return None
            clean[key] = tuple(str(p) for p in paths)
    if "network" in given:
        if not isinstance(given["network"], bool):
            problems.append(Problem("bad-field-type", "sandbox 'network' must be True or False"))
            return None
        clean["network"] = given["network"]
    for key in _LIMITS:
        if key in given:
            clean[key] = given[key]
    try:
        sandbox = Sandbox(**clean)  # type: ignore[arg-type]  # the limits are checked next
    except TypeError as exc:  # pragma: no cover - every key was checked above
        problems.append(Problem("bad-field-type", f"sandbox: {exc}"))
        return None
    found = list(_limit_problems(sandbox))
    problems.extend(found)
    return None if found else sandbox


def _limit_problems(sandbox: Sandbox) -> list[Problem]:
    return [
        Problem(
            "bad-field-type",
            f"sandbox {key!r} must be a whole number of at least 1, got {getattr(sandbox, key)!r}"[:200],
        )
        for key in _LIMITS
        if isinstance(getattr(sandbox, key), bool)
        or not isinstance(getattr(sandbox, key), int)
        or getattr(sandbox, key) < 1
    ]


def project_sandbox_default(root: Path) -> tuple[bool, list[Diagnostic]]:
    """Whether `agent/sandbox.toml` sandboxes every stdio connection that does not say otherwise (`stdio = true`)."""
    path = root / SANDBOX_FILE
    if not path.exists():
        return False, []

    def problem(message: str) -> tuple[bool, list[Diagnostic]]:
        # Fail closed: a default the operator meant to set but mistyped still sandboxes.
        fix = f"{message}; write `stdio = true` or `stdio = false`"
        return True, [Diagnostic(path, None, "error", fix, "bad-sandbox")]

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return problem(f"cannot read {SANDBOX_FILE}: {exc}")
    unknown = sorted(set(data) - {"stdio"})
    if unknown:
        return problem(f"unknown key {unknown[0]!r} in {SANDBOX_FILE} (it takes `stdio`)")
    stdio = data.get("stdio", False)
    if not isinstance(stdio, bool):
        return problem(f"`stdio` in {SANDBOX_FILE} must be true or false, got {stdio!r}")
    return stdio, []
