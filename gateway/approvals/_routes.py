"""`GET /v1/approvals` (the calls waiting), `GET /v1/approvals/{id}` (one) and `POST /v1/approvals/{id}`
(`{"decision": "approve"|"deny"}`).
Operators only: the console's approvals panel and `agent-sdk approvals` call them."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..auth.roles import require_operator
from ..errors import ApiError, InvalidRequest
from ..http.json_answers import error_response, read_object
from ..logs import ACTION_EVENT
from ..runtime import principal_of, runtime_of
from ._gate import ApprovalGate
from ._pending import ApprovalNotFound
from ._store import not_found

__all__ = ["approval_routes"]

_actions_log = logging.getLogger("agent_sdk.approvals")


def _gate(request: Request) -> ApprovalGate:
    guard = runtime_of(request).guard
    if guard is None:  # pragma: no cover - every served app has one
        raise InvalidRequest("this gateway holds no calls for approval")
    return guard.approvals


async def list_approvals(request: Request) -> Response:
    try:
        require_operator(request)
        pending = await _gate(request).store.pending()
    except ApiError as exc:
        return error_response(exc)
    return JSONResponse({"ok": True, "approvals": [p.to_json() for p in pending]})


async def show_approval(request: Request) -> Response:
    try:
        require_operator(request)
        approval_id: str = request.path_params["id"]
        pending = await _gate(request).store.get(approval_id)
        if pending is None:
            raise ApprovalNotFound(not_found(approval_id))
    except ApiError as exc:
        return error_response(exc)
    return JSONResponse({"ok": True, "approval": pending.to_json()})


async def decide(request: Request) -> Response:
    try:
        require_operator(request)
        body = await read_object(request)
        decision = body.get("decision")
        if decision not in ("approve", "deny") or set(body) - {"decision"}:
            raise InvalidRequest('send {"decision": "approve"} or {"decision": "deny"}')
        approval_id: str = request.path_params["id"]
        by = principal_of(request).id
        pending = await _gate(request).decide(approval_id, decision == "approve", by)
    except ApiError as exc:
        return error_response(exc)
    state = "approved" if decision == "approve" else "denied"
    _actions_log.info(  # an operator's action: the console's *Operator actions* lists it
        "operator (%s) %s a call of tool %r (approval %s)",
        principal_of(request).kind,
        state,
        pending.target,
        approval_id,
        extra={"event": ACTION_EVENT, "action": decision, "connection": pending.connection, "tool": pending.target},
    )
    return JSONResponse({"ok": True, "approval": pending.to_json(), "decision": state, "by": by})


def approval_routes() -> list[Route]:
    return [
        Route("/v1/approvals", list_approvals, methods=["GET"]),
        Route("/v1/approvals/{id}", show_approval, methods=["GET"]),
        Route("/v1/approvals/{id}", decide, methods=["POST"]),
    ]
