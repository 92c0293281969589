"""Shared fixtures: anyio backend and free loopback ports."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
