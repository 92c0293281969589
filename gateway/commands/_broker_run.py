"""Run one operation on a `Broker` for a CLI command: quiet SDK logs, a progress line, one-sentence errors."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from connections import Broker, ConnectionsError, Project
from connections.serving import REOPEN_NOTE, STDERR_LOGGER, RedactingFilter
from oauth import OAuthError

from ..errors import CliError
from ..stores import cli_token_store
from ._common import state_root_of
from ._progress import waiting

__all__ = ["run_with_broker"]

_T = TypeVar("_T")


def run_with_broker(
    project: Project, args: argparse.Namespace, operation: Callable[[Broker], Awaitable[_T]], *, what: str
) -> _T:
    """`operation(broker)` on a broker over the project (static headers, the state root's OAuth tokens).

    `what` names the wait on the progress line. Raises `CliError` with the connection's error sentence.
    """
    if os.environ.get("AGENT_SDK_DEBUG") != "1":
        _quiet_sdk_logs()
    _show_child_stderr()

    async def main() -> _T:
        # The local path (reading through to the deployment store for grants moved there with --store), or the
        # replicas' Redis with AGENT_SDK_STATE_URL.
        state_root = state_root_of(args)  # hidden from sandboxed children, as `serve` hides its own
        store = cli_token_store(state_root)
        try:
            async with Broker(project, token_store=store, sandbox_hidden=[str(state_root)]) as broker:
                return await operation(broker)
        finally:
            await store.aclose()

    try:
        with waiting(what):
            return anyio.run(main)
    except (ConnectionsError, OAuthError) as exc:
        # This process ends here: there is no next use to reopen a session on.
        raise CliError(str(exc).replace(REOPEN_NOTE, "")) from None


def _show_child_stderr() -> None:
    # No log is configured in a one-shot command: a stdio child's stderr lines go to ours as the
    # child wrote them, after the connection's name (as `serve`'s text log has them).
    log = logging.getLogger(STDERR_LOGGER)
    if log.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(connection)s| %(message)s"))
    handler.addFilter(RedactingFilter())
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def _quiet_sdk_logs() -> None:
    # The SDK logs transport failures with `logger.exception`; with no handler configured, Python's
    # last-resort handler would print those tracebacks. The error the user needs is ours.
    for name in ("mcp", "httpx2"):
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
