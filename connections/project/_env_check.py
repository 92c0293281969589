"""`unset_variables`: the `${VAR}` references a project makes that the current environment lacks.

Expansion happens when a client opens (`connections/project/_expand.py`), so an unset variable would otherwise pass
`validate` and `serve` and then fail every use of the connection. `agent-sdk validate` reports
each one as a warning (an error with `--strict`); `serve` prints them at start.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._diagnostics import Diagnostic, Severity
from ._expand import references
from ._loader import Project

__all__ = ["unset_variables"]


def unset_variables(project: Project, environ: Mapping[str, str], *, strict: bool = False) -> list[Diagnostic]:
    """One diagnostic per (connection, place, variable) whose variable is not set in `environ`."""
    severity: Severity = "error" if strict else "warning"
    out: list[Diagnostic] = []
    for defn in sorted(project.connections.values(), key=lambda d: d.name):
        places = [
            *((f"header {k!r}", v) for k, v in defn.headers.items()),
            *((f"env {k!r}", v) for k, v in defn.env.items()),
            *((f"argument args[{i}]", v) for i, v in enumerate(defn.args)),
        ]
        for where, value in places:
            for variable in dict.fromkeys(references(value)):
                if variable in environ:
                    continue
                out.append(
                    Diagnostic(
                        defn.source or project.root,
                        defn.line,
                        severity,
                        f"connection {defn.name!r}: {where} reads ${{{variable}}}, which is not set in this "
                        f"environment; export {variable} before agent-sdk serve (until then every use of "
                        f"{defn.name!r} fails)",
                        "unset-variable",
                    )
                )
    return out
