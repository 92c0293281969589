"""The gateway: the HTTP app, auth chains, sessions and turns, and the `agent-sdk` CLI."""

from .app import create_app as create_app
from .cli import main as main
from .errors import CliError as CliError
from .errors import GatewayError as GatewayError
from .info import project_info as project_info

__all__ = ["CliError", "GatewayError", "create_app", "main", "project_info"]
