"""Sessions behind `ask`/`check` and `/v1/session*`: the file store and the service that runs turns."""

from ._service import LiveSession as LiveSession
from ._service import SessionService as SessionService
from ._service import parse_continuation_token as parse_continuation_token
from ._store import FileSessionStore as FileSessionStore
from ._store import SessionRecord as SessionRecord

__all__ = ["FileSessionStore", "LiveSession", "SessionRecord", "SessionService", "parse_continuation_token"]
