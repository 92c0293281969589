"""Connection definitions, the project loader and (soon) the client pool and turn builder.

Imports `oauth` only (`gateway -> connections -> oauth`).
"""

from oauth import OAuthConfig as OAuthConfig

from ._account import HUB_CONNECTORS_PATH as HUB_CONNECTORS_PATH
from ._account import Connector as Connector
from ._account_check import AccountCheck as AccountCheck
from ._account_check import check_account_servers as check_account_servers
from ._account_login import ACCOUNT_URL_ENV as ACCOUNT_URL_ENV
from ._account_login import API_KEY_ENV as API_KEY_ENV
from ._account_login import KEYRING_SERVICE as KEYRING_SERVICE
from ._account_login import AccountCredentials as AccountCredentials
from ._account_login import AccountSetupError as AccountSetupError
from ._account_login import account_file as account_file
from ._account_login import forget_account_login as forget_account_login
from ._account_login import keyring_user as keyring_user
from ._account_login import load_account_credentials as load_account_credentials
from ._account_login import normalize_hub_url as normalize_hub_url
from ._account_login import save_account_login as save_account_login
from ._account_login import saved_hub_url as saved_hub_url
from ._broker import Broker as Broker
from ._broker import Host as Host
from ._call_context import CallContext as CallContext
from ._call_context import InputHandler as InputHandler
from ._call_context import calling as calling
from ._call_context import current_call as current_call
from ._call_context import log_level_value as log_level_value
from ._clients import INHERITED_ENV as INHERITED_ENV
from ._clients import STDERR_LOGGER as STDERR_LOGGER
from ._definitions import AuthCallback as AuthCallback
from ._definitions import ConnectionDefinition as ConnectionDefinition
from ._definitions import ConnectionKind as ConnectionKind
from ._definitions import Timeouts as Timeouts
from ._definitions import define_connection as define_connection
from ._diagnostics import Diagnostic as Diagnostic
from ._diagnostics import Severity as Severity
from ._env_check import unset_variables as unset_variables
from ._exceptions import AccountConnectorMissing as AccountConnectorMissing
from ._exceptions import AccountError as AccountError
from ._exceptions import AccountNotConfigured as AccountNotConfigured
from ._exceptions import AccountToolCollision as AccountToolCollision
from ._exceptions import AccountUnauthorized as AccountUnauthorized
from ._exceptions import AuthorizationUnavailable as AuthorizationUnavailable
from ._exceptions import ClientError as ClientError
from ._exceptions import ConnectionsError as ConnectionsError
from ._exceptions import ConnectionUnauthorized as ConnectionUnauthorized
from ._exceptions import ConnectionUnavailable as ConnectionUnavailable
from ._exceptions import EnvironmentVariableMissing as EnvironmentVariableMissing
from ._exceptions import NotOffered as NotOffered
from ._exceptions import ProjectError as ProjectError
from ._exceptions import ResultTooLarge as ResultTooLarge
from ._exceptions import SignInRequired as SignInRequired
from ._exceptions import ToolInputError as ToolInputError
from ._exceptions import TurnBuildError as TurnBuildError
from ._exceptions import TurnProblem as TurnProblem
from ._exceptions import UnknownConnection as UnknownConnection
from ._exceptions import UnknownTool as UnknownTool
from ._exceptions import UpstreamError as UpstreamError
from ._exceptions import UpstreamTimeout as UpstreamTimeout
from ._expand import expand_map as expand_map
from ._host import HostMcp as HostMcp
from ._identity import acting_for as acting_for
from ._listing_cache import DEFAULT_LISTING_TTL as DEFAULT_LISTING_TTL
from ._listing_cache import ListingCache as ListingCache
from ._loader import RESERVED_TOOL_NAMES as RESERVED_TOOL_NAMES
from ._loader import Extension as Extension
from ._loader import Project as Project
from ._loader import load_project as load_project
from ._names import NAME_RULE as NAME_RULE
from ._names import is_valid_tool_name as is_valid_tool_name
from ._offer_calls import Freshness as Freshness
from ._offerings import Merged as Merged
from ._offerings import Offerings as Offerings
from ._pin_guard import PinGuard as PinGuard
from ._pin_guard import pinnable as pinnable
from ._pin_snapshot import compare as compare_pins
from ._pin_snapshot import definition_diff as definition_diff
from ._pin_snapshot import lock_of as lock_of
from ._pin_snapshot import snapshot as pin_snapshot
from ._pins import LOCK_FILE as LOCK_FILE
from ._pins import Drift as Drift
from ._pins import Lock as Lock
from ._pins import read_lock as read_lock
from ._pins import write_lock as write_lock
from ._pool import AuthFor as AuthFor
from ._pool import ClientPool as ClientPool
from ._redact import RedactingFilter as RedactingFilter
from ._redact import redact as redact
from ._redact import remember_secret as remember_secret
from ._redact import shown_command as shown_command
from ._redact import shown_url as shown_url
from ._restart import RestartPolicy as RestartPolicy
from ._session import SessionInfo as SessionInfo
from ._session_runner import ConnectionStatus as ConnectionStatus
from ._tasks import TASK_METHODS as TASK_METHODS
from ._tasks import ToolTask as ToolTask
from ._tool_results import holds_long_text as holds_long_text
from ._tools import Effect as Effect
from ._tools import ServerTool as ServerTool
from ._tools import ToolContext as ToolContext
from ._tools import define_tool as define_tool
from ._toolset import CallObserver as CallObserver
from ._toolset import ToolOutcome as ToolOutcome
from ._toolset import Toolset as Toolset
from ._toolset import TurnTool as TurnTool
from ._toolset import observed as observed
from ._tracing import tracing_enabled as tracing_enabled
from ._translate import REOPEN_NOTE as REOPEN_NOTE
from ._translate import transport_failure as transport_failure
from ._turns import TurnBuilder as TurnBuilder
from ._upstream_changes import Change as Change
from ._warm import WarmProgress as WarmProgress

__all__ = [
    "ACCOUNT_URL_ENV",
    "API_KEY_ENV",
    "DEFAULT_LISTING_TTL",
    "HUB_CONNECTORS_PATH",
    "INHERITED_ENV",
    "KEYRING_SERVICE",
    "LOCK_FILE",
    "NAME_RULE",
    "REOPEN_NOTE",
    "RESERVED_TOOL_NAMES",
    "STDERR_LOGGER",
    "TASK_METHODS",
    "AccountCheck",
    "AccountConnectorMissing",
    "AccountCredentials",
    "AccountError",
    "AccountNotConfigured",
    "AccountSetupError",
    "AccountToolCollision",
    "AccountUnauthorized",
    "AuthCallback",
    "AuthFor",
    "AuthorizationUnavailable",
    "Broker",
    "CallContext",
    "CallObserver",
    "Change",
    "ClientError",
    "ClientPool",
    "ConnectionDefinition",
    "ConnectionKind",
    "ConnectionStatus",
    "ConnectionUnauthorized",
    "ConnectionUnavailable",
    "ConnectionsError",
    "Connector",
    "Diagnostic",
    "Drift",
    "Effect",
    "EnvironmentVariableMissing",
    "Extension",
    "Freshness",
    "Host",
    "HostMcp",
    "InputHandler",
    "ListingCache",
    "Lock",
    "Merged",
    "NotOffered",
    "OAuthConfig",
    "Offerings",
    "PinGuard",
    "Project",
    "ProjectError",
    "RedactingFilter",
    "RestartPolicy",
    "ResultTooLarge",
    "ServerTool",
    "SessionInfo",
    "Severity",
    "SignInRequired",
    "Timeouts",
    "ToolContext",
    "ToolInputError",
    "ToolOutcome",
    "ToolTask",
    "Toolset",
    "TurnBuildError",
    "TurnBuilder",
    "TurnProblem",
    "TurnTool",
    "UnknownConnection",
    "UnknownTool",
    "UpstreamError",
    "UpstreamTimeout",
    "WarmProgress",
    "account_file",
    "acting_for",
    "calling",
    "check_account_servers",
    "compare_pins",
    "current_call",
    "define_connection",
    "define_tool",
    "definition_diff",
    "expand_map",
    "forget_account_login",
    "holds_long_text",
    "is_valid_tool_name",
    "keyring_user",
    "load_account_credentials",
    "load_project",
    "lock_of",
    "log_level_value",
    "normalize_hub_url",
    "observed",
    "pin_snapshot",
    "pinnable",
    "read_lock",
    "redact",
    "remember_secret",
    "save_account_login",
    "saved_hub_url",
    "shown_command",
    "shown_url",
    "tracing_enabled",
    "transport_failure",
    "unset_variables",
    "write_lock",
]
