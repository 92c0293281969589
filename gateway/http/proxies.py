"""`--trusted-proxy`: the peers whose forwarding headers name the client.

A request whose TCP peer is in one of the trusted networks may carry `X-Forwarded-For` or
`Forwarded` (RFC 7239); the client is then the rightmost address in it that is not itself a
trusted proxy (each proxy appends the address it saw, so everything left of the last untrusted
hop was written by the client and proves nothing). Any other peer's forwarding headers give
nothing: loopback-strict refuses them (401), the other modes never read them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.types import Scope

from ._asgi import header_values

__all__ = ["PROXIED_BY", "TrustedProxies"]

PROXIED_BY = "agent_sdk.proxied_by"
"""Scope extension: the trusted proxy's own address, set on every request that came through one."""

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _address(value: str) -> str | None:
    """One hop of `X-Forwarded-For` or a `Forwarded` `for=` value, as a bare IP (None if it is not one)."""
    value = value.strip().strip('"')
    if value.startswith("["):  # RFC 7239 §6: "[2001:db8::1]:4711"
        value = value[1 : value.find("]")] if "]" in value else ""
    elif value.count(":") == 1:  # "192.0.2.60:4711"
        value = value.split(":", 1)[0]
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None  # "unknown", an obfuscated "_hidden" node, or garbage


def _hops(scope: Scope) -> list[str | None]:
    hops: list[str | None] = []
    for value in header_values(scope, b"forwarded"):
        for element in value.split(","):
            for pair in element.split(";"):
                key, _, item = pair.partition("=")
                if key.strip().lower() == "for":
                    hops.append(_address(item))
    if not hops:
        for value in header_values(scope, b"x-forwarded-for"):
            hops.extend(_address(hop) for hop in value.split(","))
    return hops


class TrustedProxies:
    """The `--trusted-proxy` networks (CIDR or single addresses). Raises `ValueError` for a bad one."""

    def __init__(self, networks: Iterable[str]) -> None:
        self.networks: tuple[_Network, ...] = tuple(ipaddress.ip_network(n.strip(), strict=False) for n in networks)

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.networks)

    def rewrite(self, scope: Scope) -> None:
        """From a trusted peer: note it as the proxy and make the forwarded client the scope's `client`."""
        client = scope.get("client")
        if client is None or not self.trusts(client[0]):
            return
        extensions = scope.get("extensions")
        if extensions is None:
            extensions = scope["extensions"] = {}
        extensions[PROXIED_BY] = client[0]
        for hop in reversed(_hops(scope)):
            if hop is None:
                return  # an unreadable hop: the client is unknown, keep the proxy's address
            if not self.trusts(hop):
                scope["client"] = (hop, 0)
                return
