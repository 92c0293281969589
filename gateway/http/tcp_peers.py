"""Who owns the other end of a loopback TCP connection: the uid of the peer's socket.

Loopback-strict admits "a process of the same user on this host", not "anything that connects
from 127.0.0.1": a reverse proxy on the same host (run, as proxies are, by its own service user)
connects from loopback too, and without this check every remote client behind it would be
admitted. Linux tells each TCP socket's owner through `NETLINK_SOCK_DIAG`: one request naming
the peer socket's exact 4-tuple (its local address is the peer's address and port, its remote
address ours) answers with that one socket, uid included, in a few microseconds. Where netlink is
refused (a sandbox), the same row is read from `/proc/net/tcp` and `/proc/net/tcp6`, which list
every socket on the host: that costs milliseconds per connection on a busy host (8 ms with 545
sockets, measured by bench/profile_hop.py), so it is only the fallback. There is no portable
socket option for a TCP peer's credentials (`SO_PEERCRED` is for Unix sockets), and no maintained
library asks for one socket (psutil walks every process's file descriptors; pyroute2's diag module
would be a large dependency for a 56-byte request): the request and the parser are ours.

The lookup runs once per connection (`gateway.http.protocol`), or once per request for an app
served by another ASGI server; on a platform without `/proc/net` it finds nothing, and
loopback-strict then admits no one (fail closed: use `--bearer-token`).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from pathlib import Path

__all__ = ["own_uid", "peer_uid"]

_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NO_COOKIE = 0xFFFFFFFF
_UID_AT = 16 + 64  # nlmsghdr, then inet_diag_msg: family..retrans (4), sockid (48), expires, rqueue, wqueue


def own_uid() -> int:
    """This process's effective uid."""
    return os.geteuid()


def _key(address: str, port: int) -> tuple[str, str] | None:
    """`(ipv4 form, ipv6 form)` of an address and port as /proc/net/tcp{,6} print them (each 32-bit
    word in host byte order, little-endian here); None for something that is not an IP."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    v6 = ip if isinstance(ip, ipaddress.IPv6Address) else ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + ip.packed)
    packed6 = v6.packed
    six = "".join(f"{int.from_bytes(packed6[i : i + 4], 'little'):08X}" for i in range(0, 16, 4))
    mapped = v6.ipv4_mapped
    four = f"{int.from_bytes(mapped.packed, 'little'):08X}" if mapped is not None else ""
    return f"{four}:{port:04X}" if four else "", f"{six}:{port:04X}"


def peer_uid(client: tuple[str, int] | None, server: tuple[str, int] | None) -> int | None:
    """The uid owning the socket at `client` connected to `server` (both on this host), or None when
    no such socket is listed (not on this host, already closed, or no /proc)."""
    if client is None or server is None:
        return None
    try:
        return _asked(client, server)
    except (OSError, ValueError, struct.error):
        return _listed(client, server)


def _asked(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid from one `SOCK_DIAG_BY_FAMILY` request for exactly that socket (None: no such socket).
    Raises `OSError` where netlink is not available."""
    peer, us = ipaddress.ip_address(client[0]), ipaddress.ip_address(server[0])
    if peer.version != us.version:
        return None
    family = socket.AF_INET if peer.version == 4 else socket.AF_INET6
    sockid = (
        struct.pack("!HH", client[1], server[1])
        + peer.packed.ljust(16, b"\0")
        + us.packed.ljust(16, b"\0")
        + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE)
    )
    request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    message = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + request
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
        diag.settimeout(1.0)
        diag.sendto(message, (0, 0))
        answer = diag.recv(4096)
    (kind,) = struct.unpack_from("=H", answer, 4)
    if kind != _SOCK_DIAG_BY_FAMILY:  # NLMSG_ERROR: no such socket (ENOENT)
        return None
    return struct.unpack_from("=I", answer, _UID_AT)[0]


def _listed(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid from `/proc/net/tcp{,6}`'s row for that socket (the fallback: reads every socket)."""
    ours, theirs = _key(*client), _key(*server)
    if ours is None or theirs is None:
        return None
    for table, index in ((_TABLES[0], 0), (_TABLES[1], 1)):
        local, remote = ours[index], theirs[index]
        if not local or not remote:
            continue
        try:
            text = table.read_text()
        except OSError:
            continue
        at = text.find(f" {local} {remote} ")
        if at < 0:
            continue
        fields = text[at : text.find("\n", at)].split()
        # local, remote, st, tx:rx, tr:when, retrnsmt, uid, ...
        if len(fields) > 6 and fields[6].isdigit():
            return int(fields[6])
    return None
