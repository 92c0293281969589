"""How the user reaches the authorization page: the system browser, a printed URL, or no user at all.

An `Interaction` is called with the authorization URL and the `CallbackListener`; it may return at
once (the listener will receive the redirect) or deliver the redirect itself (a pasted URL, the
headless follower).
"""

from __future__ import annotations

import sys
import threading
import webbrowser
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Protocol, TextIO
from urllib.parse import urljoin

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import httpx2

from .._exceptions import AuthorizationError, OAuthError
from .._shared import printable
from ._callback import CallbackListener, parse_redirect

__all__ = ["Interaction", "follow_redirects", "open_browser", "print_url"]


class Interaction(Protocol):
    """Takes the user (or a robot) to `authorization_url`; the redirect reaches `listener`."""

    async def __call__(self, authorization_url: str, listener: CallbackListener) -> None: ...


def _say(out: TextIO, text: str) -> None:
    print(text, file=out, flush=True)


def open_browser(out: TextIO | None = None, opener: Callable[[str], bool] = webbrowser.open) -> Interaction:
    """The default: open the system browser, print the URL too (in case none opens), then wait."""

    async def interact(authorization_url: str, listener: CallbackListener) -> None:
        stream = out or sys.stderr
        shown = printable(authorization_url, 8000)
        _say(stream, f"Opening your browser to log in. If it does not open, visit:\n\n  {shown}\n")
        opened = await anyio.to_thread.run_sync(opener, authorization_url)
        if not opened:
            _say(stream, "No browser could be opened; open the URL above yourself.")
        _say(stream, f"Waiting for the redirect to {listener.redirect_uri} (Ctrl-C to cancel)...")

    return interact


def print_url(out: TextIO | None = None, stdin: TextIO | None = None) -> Interaction:
    """`--no-browser`: print the URL; accept the redirect on the listener or a pasted redirect URL on stdin."""

    async def interact(authorization_url: str, listener: CallbackListener) -> None:
        stream, source = out or sys.stderr, stdin or sys.stdin
        _say(stream, f"Open this URL in a browser and log in:\n\n  {printable(authorization_url, 8000)}\n")
        _say(
            stream,
            f"Waiting for the redirect to {listener.redirect_uri} (Ctrl-C to cancel). If the browser runs on "
            "another machine, paste the URL it ended on here and press Enter:",
        )
        while True:
            line = await _read_line(source)
            if not line:  # stdin closed: keep waiting for the listener only
                return
            if not line.strip():
                continue
            try:
                listener.deliver(parse_redirect(line))
                return
            except AuthorizationError as exc:
                _say(stream, f"{exc}; paste the whole URL from the browser's address bar.")

    return interact


async def _read_line(source: TextIO) -> str:
    """One line from `source`, read in a *daemon* thread: a login that ends (success, error, timeout,
    Ctrl-C) while nobody types must not keep the process alive until Enter or end of input, which a
    worker thread blocked in `readline` would (the interpreter joins non-daemon threads at exit)."""
    done = anyio.Event()
    box: list[str] = []
    token = anyio.lowlevel.current_token()

    def read() -> None:
        try:
            box.append(source.readline())
        except (OSError, ValueError):
            box.append("")
        try:
            anyio.from_thread.run_sync(done.set, token=token)
        except RuntimeError:
            pass  # the event loop is gone: the login ended while this thread waited for input

    threading.Thread(target=read, name="agent-sdk-oauth-stdin", daemon=True).start()
    await done.wait()
    return box[0]


class _Forms(HTMLParser):
    """Collects each `<form>`'s action, method and inputs (enough for login and consent pages)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, str, list[tuple[str, str, str]]]] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append((values.get("action", ""), values.get("method", "get").lower(), []))
        elif tag in ("input", "button") and self.forms and values.get("name"):
            self.forms[-1][2].append((values["name"], values.get("type", "text").lower(), values.get("value", "")))
        elif tag == "a" and values.get("href"):
            self.links.append(values["href"])


def follow_redirects(
    *, username: str = "agent-sdk", password: str = "agent-sdk", max_steps: int = 20, timeout: float = 30.0
) -> Interaction:
    """Non-interactive: follow the authorization redirects and submit each form (login, then consent).

    For automation and tests against servers whose pages are plain HTML forms (oidc-provider's
    development interactions, many test IdPs). Text fields named like a login get `username`,
    password fields get `password`, hidden fields keep their values.
    """

    async def interact(authorization_url: str, listener: CallbackListener) -> None:
        try:
            await _follow(authorization_url, listener, username, password, max_steps, timeout)
        except OAuthError as exc:
            listener.fail(exc)
        except httpx2.HTTPError as exc:
            listener.fail(
                AuthorizationError(f"the non-interactive login could not reach the server ({type(exc).__name__})")
            )

    return interact


async def _follow(
    url: str, listener: CallbackListener, username: str, password: str, steps: int, http_timeout: float
) -> None:
    async with httpx2.AsyncClient(follow_redirects=False, timeout=http_timeout) as browser:
        method, data = "GET", None
        for _ in range(steps):
            if url.startswith(listener.redirect_uri):
                await browser.get(url)  # the real redirect reaches the real listener
                return

            if method == "POST":
                response = await browser.post(url, data=data)
            else:
                response = await browser.get(url)
            if response.is_redirect:
                url, method, data = urljoin(url, response.headers["location"]), "GET", None
                continue
            if response.status_code != 200:
                raise AuthorizationError(
                    f"the authorization server answered HTTP {response.status_code} at {printable(url.split('?')[0])} "
                    "during the non-interactive login"
                )
            parser = _Forms()
            parser.feed(response.text)
            form = next((f for f in parser.forms if f[1] == "post"), None)
            if form is None:
                raise AuthorizationError(
                    f"the page at {printable(url.split('?')[0])} has no form the non-interactive login can submit; "
                    "log in with a browser instead (drop --non-interactive)"
                )
            action, _, fields = form
            data = {}
            for name, kind, value in fields:
                if kind == "password":
                    data[name] = password
                elif kind in ("text", "email") and not value:
                    data[name] = username
                elif kind not in ("submit", "button") or name not in data:
                    data[name] = value
            url, method = urljoin(str(response.url), action), "POST"
        raise AuthorizationError(f"the non-interactive login did not reach the redirect within {steps} steps")
