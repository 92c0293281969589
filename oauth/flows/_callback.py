"""The loopback redirect listener (RFC 8252 §7.3): a tiny HTTP/1.1 responder on 127.0.0.1.

Hand-written on anyio streams rather than a uvicorn app: it answers one kind of request, must bind
before dynamic registration (the port is part of the redirect URI), and must close the moment the
login ends, timeout or Ctrl-C included.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from urllib.parse import parse_qsl, urlsplit

import anyio
import anyio.abc

from .._exceptions import AuthorizationError, OAuthError

__all__ = ["CallbackListener", "loopback_listener", "parse_redirect"]

CALLBACK_PATH = "/callback"
MAX_REQUEST_HEAD = 16384
"""The redirect's request head (request line and headers) may be this long; longer is refused whole."""
_PAGE = (
    "<!doctype html><meta charset=utf-8><title>agent-sdk</title>"
    "<p>{message}</p><p>You can close this window and return to the terminal.</p>"
)


def parse_redirect(url: str) -> dict[str, str]:
    """The query parameters of a redirect URL (what a user pastes with `--no-browser`)."""
    parts = urlsplit(url.strip())
    if not parts.query:
        raise AuthorizationError("the pasted text is not the redirect URL (it has no query string with a code)")
    return dict(parse_qsl(parts.query, keep_blank_values=True))


class CallbackListener:
    """Receives the authorization redirect; `wait()` returns its query parameters (first one wins)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.redirect_uri = f"http://127.0.0.1:{port}{CALLBACK_PATH}"
        self._done = anyio.Event()
        self._params: dict[str, str] | None = None
        self._error: OAuthError | None = None
        self._state: str | None = None

    def expect(self, state: str) -> None:
        """The `state` this login sent: the page says "Login complete." only for a redirect carrying it."""
        self._state = state

    def deliver(self, params: dict[str, str]) -> None:
        """Accept redirect parameters (from the listener or a pasted URL); later ones are ignored."""
        if not self._done.is_set():
            self._params = params
            self._done.set()

    def fail(self, error: OAuthError) -> None:
        """End the wait with `error` (e.g. the headless follower met a page it cannot submit)."""
        if not self._done.is_set():
            self._error = error
            self._done.set()

    async def wait(self) -> dict[str, str]:
        """The redirect parameters; raises the error given to `fail()`."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._params is not None
        return self._params

    async def _serve(self, stream: anyio.abc.ByteStream) -> None:
        async with stream:
            data = b""
            with anyio.move_on_after(10):
                while b"\r\n\r\n" not in data and len(data) <= MAX_REQUEST_HEAD:
                    try:
                        chunk = await stream.receive(4096)
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        return
                    data += chunk
            head = data.split(b"\r\n\r\n", 1)[0]
            if len(head) > MAX_REQUEST_HEAD:
                # Never parse a cut request line: its state would be cut too and look forged.
                await self._respond(stream, 414, "The redirect was too long; see the terminal.")
                self.fail(
                    AuthorizationError(
                        f"the login redirect to {self.redirect_uri} was longer than {MAX_REQUEST_HEAD} bytes, so it "
                        "was refused unread; the authorization server sent too much in the URL"
                    )
                )
                return
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ")
            target = parts[1] if len(parts) >= 2 else ""
            split = urlsplit(target)
            if parts[0] != "GET" or split.path != CALLBACK_PATH:
                await self._respond(stream, 404, "Not found.")
                return
            params = dict(parse_qsl(split.query, keep_blank_values=True))
            self.deliver(params)
            await self._respond(stream, 200, self._verdict(params))

    def _verdict(self, params: dict[str, str]) -> str:
        """What the browser page says; the terminal has the details (and the final word)."""
        state = params.get("state", "")
        if self._state is None or not hmac.compare_digest(state.encode(), self._state.encode()):
            return "This redirect was not the answer to the login in progress; see the terminal."
        if "error" in params or "code" not in params:
            return "Login failed; see the terminal."
        return "Login complete."

    @staticmethod
    async def _respond(stream: anyio.abc.ByteStream, status: int, message: str) -> None:
        body = _PAGE.format(message=message).encode()
        reason = {200: "OK", 404: "Not Found", 414: "URI Too Long"}.get(status, "Error")
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        )
        try:
            await stream.send(head.encode() + body)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass


@asynccontextmanager
async def loopback_listener(port: int = 0) -> AsyncGenerator[CallbackListener]:
    """Listen on 127.0.0.1:`port` (0: any free port) until the block ends. Raises `AuthorizationError`."""
    try:
        tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    except OSError as exc:
        raise AuthorizationError(
            f"cannot listen for the login redirect on 127.0.0.1:{port} ({exc.strerror or exc}); "
            "choose another redirect_port or free that one"
        ) from None
    bound = tcp.extra(anyio.abc.SocketAttribute.local_port)
    listener = CallbackListener(bound)
    error: Exception | None = None
    async with tcp, anyio.create_task_group() as tg:

        async def accept_loop() -> None:
            await tcp.serve(listener._serve, task_group=tg)  # pyright: ignore[reportPrivateUsage]

        tg.start_soon(accept_loop)
        try:
            yield listener
        except Exception as exc:  # re-raised below, outside the task group, so it is not wrapped in a group
            error = exc
        finally:
            tg.cancel_scope.cancel()
    if error is not None:
        raise error
