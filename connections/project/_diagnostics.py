"""`Diagnostic`: one finding about an agent project, with where it is and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["Diagnostic", "Severity"]

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A problem found while loading a project. Errors block `serve`; warnings only print."""

    path: Path
    line: int | None
    severity: Severity
    message: str
    code: str
    """A stable, short identifier of the rule (e.g. `unknown-field`), for tools and tests."""

    def format(self, root: Path | None = None) -> str:
        """`path:line: severity: message`, with `path` relative to `root` when it is inside it."""
        shown = self.path
        if root is not None:
            try:
                shown = self.path.resolve().relative_to(root.resolve())
            except ValueError:
                shown = self.path
        where = f"{shown}:{self.line}" if self.line is not None else f"{shown}"
        return f"{where}: {self.severity}: {self.message}"

    def to_json(self, root: Path | None = None) -> dict[str, object]:
        shown = self.path
        if root is not None:
            try:
                shown = self.path.resolve().relative_to(root.resolve())
            except ValueError:
                shown = self.path
        return {
            "path": str(shown),
            "line": self.line,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
        }
