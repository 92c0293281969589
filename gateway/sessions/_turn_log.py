"""serve's log line for a turn that did not complete (docs/operations.md): once per turn, one line."""

from __future__ import annotations

import logging
import os
from typing import Any

__all__ = ["log_failed_turn"]

turns_log = logging.getLogger("agent_sdk.turns")


def log_failed_turn(session_id: str, turn_id: str, outcome: dict[str, Any], crash: Exception | None) -> None:
    """Log a turn that did not complete, naming the connections its problems name (never a secret:
    the outcome's message is the gateway's own sentence)."""
    problems: list[dict[str, Any]] = outcome.get("problems") or []
    connections = sorted({str(p["connection"]) for p in problems if p.get("connection")})
    # A cancel is the caller's own doing (a follow-up preempted the turn, or a stop): not a warning.
    turns_log.log(
        logging.INFO if outcome["status"] == "cancelled" else logging.WARNING,
        "turn %s: %s: %s",
        outcome["status"],
        outcome["error"],
        " ".join(str(outcome["message"]).split()),  # one line: a build failure lists its problems on several
        exc_info=crash if crash is not None and os.environ.get("AGENT_SDK_DEBUG") == "1" else None,
        extra={
            "event": "turn_failed",
            "session_id": session_id,
            "turn_id": turn_id,
            "code": outcome["error"],
            "status": outcome["status"],
            "connection": ",".join(connections) or None,
        },
    )
