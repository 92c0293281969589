"""The one canonical form of a resource URI (and URI template) that every decision on a resource uses.

RFC 3986 §6.2.2, syntax-based normalization: the scheme and the host in lower case (§6.2.2.1), every
percent-encoding in upper case and those of unreserved characters decoded (§6.2.2.2), and the dot
segments of the path removed (§6.2.2.3, the algorithm of §5.2.4). Beyond the RFC, a character a URI
may not hold (a space, a control character, a non-ASCII letter, `"<>\\^`|{}`) is percent-encoded as
UTF-8 (RFC 3987 §3.1's mapping of an IRI). What a WHATWG URL parser (Node's `new URL`, the TypeScript
SDK's servers; the `url` crate under pydantic's `AnyUrl`) drops is dropped too: leading and trailing
spaces and control characters, tabs and newlines anywhere, an empty port or userinfo, a scheme's default
port (§6.2.3), and an `http(s)` URI's empty path is `/`. So two spellings an upstream's URL parser reads
as one resource are one string here. A URI template keeps its `{...}` expressions as written.

The gateway decides on the canonical form and forwards that same form upstream (docs/policy.md, "Resource
URIs"): the Cedar policy, `deny_resources` / `advertise_resources`, templates, subscriptions and the audit
record all see it, so no spelling reaches an upstream that a decision did not see.
"""

from __future__ import annotations

import functools
import re
import string

__all__ = ["canonical_entry", "canonical_uri", "not_offered"]

_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
_ALLOWED = _UNRESERVED | frozenset(":/?#[]@!$&'()*+,;=%")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
_PARTS = re.compile(r"^(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$", re.DOTALL)
"""RFC 3986 Appendix B: scheme, authority, path, query, fragment."""
_EXPRESSION = re.compile(r"(\{[^{}]*\})")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_EDGES = "".join(map(chr, range(0x21)))
"""C0 controls and the space: a WHATWG parser strips them from both ends (and tabs and newlines inside)."""
_DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443", "ftp": "21"}


@functools.lru_cache(maxsize=4096)
def canonical_uri(uri: str, *, template: bool = False) -> str:
    """`uri` in its canonical form (RFC 3986 §6.2.2); a URI template (`template=True`) keeps its expressions.
    Total and idempotent: `canonical_uri(canonical_uri(u)) == canonical_uri(u)` for every string."""
    uri = uri.strip(_EDGES).replace("\t", "").replace("\n", "").replace("\r", "")
    parts = _PARTS.match(uri)
    if parts is None:  # cannot happen: every group is optional
        return _encoded(uri, template)
    scheme, authority, path, query, fragment = parts.groups()
    if scheme is not None:
        scheme = scheme.lower() if _SCHEME.fullmatch(scheme) else _encoded(scheme, template)
    out = f"{scheme}:" if scheme is not None else ""
    if authority is not None:
        out += "//" + _authority(authority, scheme, template)
        if not path and scheme in _DEFAULT_PORTS:
            path = "/"
    out += _without_dots(_encoded(path, template))
    if query is not None:
        out += "?" + _encoded(query, template)
    if fragment is not None:
        out += "#" + _encoded(fragment, template)
    return out


def canonical_entry(entry: str) -> str:
    """An entry of `advertise_resources` / `deny_resources` in canonical form: a URI template when it holds `{`."""
    return canonical_uri(entry, template="{" in entry)


def not_offered(kind: str, name: str) -> str:
    """The one sentence of a resource, template or prompt that a peer may not reach, whether it does not exist,
    no connection offers it or the policy hides it: so that a refusal never tells which."""
    return f"no advertised connection offers {kind} {name[:200]!r}"


def _authority(authority: str, scheme: str | None, template: bool) -> str:
    userinfo, _, hostport = authority.rpartition("@")
    host, colon, port = hostport.rpartition(":")
    if not colon or not (port.isdigit() or not port) or not port.isascii():  # no port (an IPv6 literal's last part)
        host, colon, port = hostport, "", ""
    port = str(int(port)) if port else ""
    if not port or _DEFAULT_PORTS.get(scheme or "") == port:  # an empty port, or the scheme's default one
        colon, port = "", ""
    host = _encoded(host, template)
    if not (template and "{" in host):
        host = _PERCENT.sub(lambda m: m[0].upper(), host.lower())
    userinfo = _encoded(userinfo, template)
    return (f"{userinfo}@" if userinfo else "") + host + colon + port


def _encoded(text: str, template: bool) -> str:
    """`text` with its percent-encodings normalized and the characters a URI cannot hold encoded."""
    if template:
        return "".join(p if i % 2 else _encoded(p, False) for i, p in enumerate(_EXPRESSION.split(text)))
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        found = _PERCENT.match(text, i) if ch == "%" else None
        if found is not None:
            decoded = chr(int(found[1], 16))
            out.append(decoded if decoded in _UNRESERVED else "%" + found[1].upper())
            i += 3
            continue
        if ch in _ALLOWED and ch != "%":
            out.append(ch)
        else:  # a stray `%`, a space, a control character, a non-ASCII letter...
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")))
        i += 1
    return "".join(out)


def _without_dots(path: str) -> str:
    """RFC 3986 §5.2.4 `remove_dot_segments`."""
    if "." not in path:
        return path
    out: list[str] = []
    rest = path
    while rest:
        if rest.startswith("../"):
            rest = rest[3:]
        elif rest.startswith("./"):
            rest = rest[2:]
        elif rest.startswith("/./"):
            rest = rest[2:]
        elif rest == "/.":
            rest = "/"
        elif rest.startswith("/../"):
            rest = rest[3:]
            if out:
                out.pop()
        elif rest == "/..":
            rest = "/"
            if out:
                out.pop()
        elif rest in {".", ".."}:
            rest = ""
        else:
            cut = rest.find("/", 1)
            segment, rest = (rest, "") if cut < 0 else (rest[:cut], rest[cut:])
            out.append(segment)
    return "".join(out)
