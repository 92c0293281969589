"""`agent-sdk audit tail|search` (the trail: the Redis stream with `AGENT_SDK_STATE_URL`, else the files under
the state root) and `agent-sdk approvals list|approve|deny` (held calls, through a running gateway's
operator routes). docs/audit.md."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
import httpx2

from ..audit import OUTCOMES, AuditQuery, audit_folder, read_file_records, read_stream_records
from ..errors import CliError
from ..state._redis import redis_client, safe_url
from ..stores import STATE_URL_ENV
from ._common import add_project_args, state_root_of
from .operator_login import missing_credential, operator_token

__all__ = ["approvals", "audit", "register"]

_GATEWAY_ENV = "AGENT_SDK_GATEWAY_URL"


def register(sub: argparse._SubParsersAction[Any]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add the `audit` and `approvals` command groups."""
    parser = sub.add_parser("audit", help="read the audit trail: who called which tool, and how it ended")
    actions = parser.add_subparsers(dest="audit_command", metavar="ACTION", required=True)
    tail = actions.add_parser("tail", help="the newest records, oldest first (one JSON object a line)")
    tail.add_argument("-n", type=int, default=20, help="how many (default 20)")
    search = actions.add_parser("search", help="the newest records that match every filter given")
    search.add_argument("-n", type=int, default=100, help="at most this many (default 100)")
    search.add_argument("--principal", help="a principal id, e.g. bearer:3f2a9c1b7d40")
    search.add_argument("--who", help="a person: the display name (e.g. an email) or OAuth subject of the caller")
    search.add_argument("--tool", help="a tool name")
    search.add_argument("--outcome", choices=OUTCOMES, help="how the call ended")
    search.add_argument("--surface", help="mcp/tools, mcp, http, stdio or session")
    search.add_argument("--since", help="an ISO 8601 time, e.g. 2026-12-01T10:00:00Z")
    for each in (tail, search):
        add_project_args(each)
        each.set_defaults(func=audit)

    held = sub.add_parser("approvals", help="list, approve or deny the calls waiting for an operator")
    verbs = held.add_subparsers(dest="approvals_command", metavar="ACTION", required=True)
    verbs.add_parser("list", help="the calls waiting, oldest first (tool, arguments, person, peer, deadline)")
    show = verbs.add_parser("show", help="one waiting call ID, in full")
    show.add_argument("id", help="the approval id (apr_...), from approvals list")
    for verb in ("approve", "deny"):
        one = verbs.add_parser(verb, help=f"{verb} the waiting call ID")
        one.add_argument("id", help="the approval id (apr_...), from approvals list")
    for each in verbs.choices.values():
        each.add_argument(
            "--url", default=None, help=f"the gateway's base URL; default ${_GATEWAY_ENV} or http://127.0.0.1:3000"
        )
        each.set_defaults(func=approvals)


def _query(args: argparse.Namespace) -> AuditQuery:
    if args.n < 1 or args.n > 10_000:
        raise CliError("-n must be from 1 to 10000")
    since = getattr(args, "since", None)
    try:
        since = AuditQuery.check_since(since) if since else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return AuditQuery(
        limit=args.n,
        principal=getattr(args, "principal", None),
        target=getattr(args, "tool", None),
        outcome=getattr(args, "outcome", None),
        surface=getattr(args, "surface", None),
        since=since,
        who=getattr(args, "who", None),
    )


async def _from_stream(url: str, query: AuditQuery) -> list[dict[str, Any]]:
    client = redis_client(url)
    try:
        return await read_stream_records(client, query)
    except Exception:  # boundary: redis-py's errors
        raise CliError(
            f"the audit stream at {safe_url(url)} cannot be read; is Redis there (AGENT_SDK_STATE_URL)?"
        ) from None
    finally:
        await client.aclose()


def audit(args: argparse.Namespace) -> int:
    """Print the records, oldest first, one JSON object a line. Raises `CliError` for a bad filter or absent Redis."""
    query = _query(args)
    url = os.environ.get(STATE_URL_ENV, "").strip()
    records = (
        anyio.run(_from_stream, url, query) if url else read_file_records(audit_folder(state_root_of(args)), query)
    )
    for record in reversed(records):
        print(json.dumps(record, ensure_ascii=False))
    return 0


def _gateway(args: argparse.Namespace) -> httpx2.Client:
    base = args.url or os.environ.get(_GATEWAY_ENV) or "http://127.0.0.1:3000"
    token = operator_token(base)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.Client(base_url=base.rstrip("/"), headers=headers, timeout=30)


def approvals(args: argparse.Namespace) -> int:
    """`list`: one JSON object a line; `approve`/`deny`: the decision. The operator's token comes from
    `AGENT_SDK_OPERATOR_TOKEN` (never a flag: `ps` shows flags), else `agent-sdk login --gateway`. Raises
    `CliError` with the gateway's sentence."""
    http = _gateway(args)
    try:
        with http:
            if args.approvals_command == "list":
                response = http.get("/v1/approvals")
            elif args.approvals_command == "show":
                response = http.get(f"/v1/approvals/{args.id}")
            else:
                decision = "approve" if args.approvals_command == "approve" else "deny"
                response = http.post(f"/v1/approvals/{args.id}", json={"decision": decision})
    except httpx2.HTTPError as exc:
        raise CliError(f"the gateway at {http.base_url} cannot be reached ({type(exc).__name__}); pass --url") from None
    try:
        body = response.json()
    except ValueError:
        raise CliError(f"the gateway answered {response.status_code} without JSON; is --url a gateway?") from None
    if response.status_code == 401 or body.get("error") == "operator_required":
        raise CliError(missing_credential(str(http.base_url), "authorization" in http.headers))
    if response.status_code != 200:
        raise CliError(f"{body.get('error', response.status_code)}: {body.get('message', '')}")
    if args.approvals_command == "list":
        for pending in body["approvals"]:
            print(json.dumps(pending))
        if not body["approvals"]:
            print("no calls are waiting for approval", file=sys.stderr)
    elif args.approvals_command == "show":
        print(json.dumps(body["approval"], indent=2, ensure_ascii=False))
    else:
        approval = body["approval"]
        print(f"{body['decision']} {args.id} ({approval['tool']} for {approval.get('name') or approval['principal']})")
    return 0
