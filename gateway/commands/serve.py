"""`agent-sdk serve`: run the gateway on uvicorn."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import CliError
from ._common import add_project_args, state_root_of
from .project import load

__all__ = ["register", "serve"]


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    p = sub.add_parser("serve", help="serve the project's tools and sessions over HTTP")
    add_project_args(p)
    p.add_argument("--host", default=os.environ.get("AGENT_SDK_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("AGENT_SDK_PORT", "3000")))
    p.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    """Refuse to start on error diagnostics; otherwise run until Ctrl-C."""
    import uvicorn

    from ..app import create_app

    project = load(args.dir)
    if not project.ok:
        for diag in project.errors:
            print(diag.format(project.root))
        raise CliError(f"{len(project.errors)} error(s) in the project; fix them (agent-sdk validate) and retry")
    app = create_app(project, state_root=state_root_of(args))
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0
