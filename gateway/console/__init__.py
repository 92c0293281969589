"""The console: a page on `serve` (`GET /`) that shows every connection, its tools, logins, latency
and failures, and lets an operator run a tool, restart a connection or log in to an OAuth one
(docs/console.md). Every datum comes from documented JSON routes.
"""

from ._binding import CALLBACK_PATH
from ._pages import SHELL_PATHS
from ._routes import console_routes
from ._services import ConsoleServices

__all__ = ["CALLBACK_PATH", "SHELL_PATHS", "ConsoleServices", "console_routes"]
