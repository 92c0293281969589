"""Who owns the other end of a loopback TCP connection (`gateway/http/tcp_peers.py`): the kernel's
answer to one sock_diag request, the same as `/proc/net/tcp` says, for our own socket and for a
socket of another user (`nobody`, through `setpriv`), and None for a socket that is gone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gateway.http import tcp_peers
from gateway.http.tcp_peers import peer_uid

_HOLD = "import socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); s.recv(1)"


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server
    server.close()


def test_our_own_connection_is_ours_by_both_lookups(listener: socket.socket) -> None:
    with socket.create_connection(listener.getsockname()):
        accepted, client = listener.accept()
        with accepted:
            server = accepted.getsockname()
            assert tcp_peers._asked(client, server) == os.geteuid()  # pyright: ignore[reportPrivateUsage]
            assert tcp_peers._listed(client, server) == os.geteuid()  # pyright: ignore[reportPrivateUsage]
            assert peer_uid(client, server) == os.geteuid()


def test_another_users_connection_is_theirs(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    child = subprocess.Popen(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c", _HOLD, str(port)]
    )
    try:
        listener.settimeout(30)
        accepted, client = listener.accept()
        with accepted:
            server = accepted.getsockname()
            nobody = 65534
            assert tcp_peers._asked(client, server) == nobody  # pyright: ignore[reportPrivateUsage]
            assert tcp_peers._listed(client, server) == nobody  # pyright: ignore[reportPrivateUsage]
            assert peer_uid(client, server) == nobody
            accepted.sendall(b"x")
    finally:
        child.wait(timeout=30)


def test_a_socket_that_is_gone_has_no_owner(listener: socket.socket) -> None:
    server = listener.getsockname()
    with socket.create_connection(server) as gone:
        client = gone.getsockname()
    listener.accept()[0].close()
    assert peer_uid(("127.0.0.1", 1), server) is None
    assert peer_uid(None, server) is None
    assert tcp_peers._asked(("::1", client[1]), server) is None  # pyright: ignore[reportPrivateUsage]
