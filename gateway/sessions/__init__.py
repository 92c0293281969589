"""Sessions behind `ask`/`check` and `/v1/session*`: the store protocol, its file and Redis implementations,
and the service that runs turns."""

from ._live import LiveSession as LiveSession
from ._live import parse_continuation_token as parse_continuation_token
from ._protocol import SessionStore as SessionStore
from ._records import SessionRecord as SessionRecord
from ._redis import RedisSessionStore as RedisSessionStore
from ._service import SessionService as SessionService
from ._store import FileSessionStore as FileSessionStore

__all__ = [
    "FileSessionStore",
    "LiveSession",
    "RedisSessionStore",
    "SessionRecord",
    "SessionService",
    "SessionStore",
    "parse_continuation_token",
]
