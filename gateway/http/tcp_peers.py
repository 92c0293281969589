"""Who owns the other end of a loopback TCP connection: the uid of the peer's socket.

Loopback-strict admits "a process of the same user on this host", not "anything that connects
from 127.0.0.1": a reverse proxy on the same host (run, as proxies are, by its own service user)
connects from loopback too, and without this check every remote client behind it would be
admitted. Linux publishes each TCP socket's owner in `/proc/net/tcp` and `/proc/net/tcp6`: the
peer's socket is the row whose local address is the peer's address and port and whose remote
address is ours. There is no portable socket option for a TCP peer's credentials (`SO_PEERCRED`
is for Unix sockets), and no maintained library reads just this row (psutil walks every process's
file descriptors, and does not give a socket's owner); the parser is a dozen lines.

The lookup runs once per connection (`gateway.http.protocol`), or once per request for an app
served by another ASGI server; on a platform without `/proc/net` it finds nothing, and
loopback-strict then admits no one (fail closed: use `--bearer-token`).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

__all__ = ["own_uid", "peer_uid"]

_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))


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
