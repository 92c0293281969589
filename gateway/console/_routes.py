"""Every route of the console, in one list for `create_app`."""

from __future__ import annotations

from starlette.routing import Route

from ..approvals._routes import approval_routes
from ..audit._routes import audit_routes
from ._browser import browser_routes
from ._failures import failure_routes
from ._login import login_routes
from ._operator_views import operator_view_routes
from ._pages import page_routes
from ._sign_in import sign_in_routes
from ._status import status_routes

__all__ = ["console_routes"]


def console_routes() -> list[Route]:
    return [
        *page_routes(),
        *status_routes(),
        *login_routes(),
        *sign_in_routes(),
        *browser_routes(),
        *failure_routes(),
        *operator_view_routes(),
        *audit_routes(),
        *approval_routes(),
    ]
