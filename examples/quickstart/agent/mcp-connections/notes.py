"""The quickstart's one connection: our notes server, started as a stdio child process."""

import sys
from pathlib import Path

from connections import define_connection

connection = define_connection(
    command=sys.executable,
    args=[str(Path(__file__).resolve().parents[2] / "servers" / "notes_server.py")],
    advertise_tools=True,
    description="An in-memory notebook (offline, no credentials).",
)
