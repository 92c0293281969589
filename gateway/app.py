"""`create_app`: the Starlette application `agent-sdk serve` runs."""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from connections import Project

from .info import project_info

__all__ = ["create_app"]


def create_app(project: Project, *, state_root: Path) -> Starlette:
    """The gateway app for a loaded project."""

    async def health(_request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    async def info(_request: Request) -> JSONResponse:
        return JSONResponse(project_info(project))

    return Starlette(routes=[Route("/v1/health", health), Route("/v1/info", info)])
