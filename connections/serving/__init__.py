"""What the gateway needs of `connections` beyond the author API: the call context, listings and
offerings, pins, the account hub's login, redaction and the pool's plumbing. Not for authors: these
names may change with the gateway.
"""

from .._call_context import PLAIN as PLAIN
from .._call_context import CallChannel as CallChannel
from .._call_context import CallContext as CallContext
from .._call_context import CallRequest as CallRequest
from .._call_context import InputHandler as InputHandler
from .._call_context import NotificationsOnly as NotificationsOnly
from .._call_context import calling as calling
from .._call_context import current_call as current_call
from .._call_context import log_level_value as log_level_value
from .._exceptions import SignInRequired as SignInRequired
from .._redact import RedactingFilter as RedactingFilter
from .._redact import redact as redact
from .._redact import remember_secret as remember_secret
from .._redact import shown_arguments as shown_arguments
from .._redact import shown_command as shown_command
from .._redact import shown_url as shown_url
from .._uris import canonical_uri as canonical_uri
from .._uris import not_offered as not_offered
from ..account._account import HUB_CONNECTORS_PATH as HUB_CONNECTORS_PATH
from ..account._account import Connector as Connector
from ..account._account_check import AccountCheck as AccountCheck
from ..account._account_check import check_account_servers as check_account_servers
from ..account._account_login import ACCOUNT_URL_ENV as ACCOUNT_URL_ENV
from ..account._account_login import API_KEY_ENV as API_KEY_ENV
from ..account._account_login import KEYRING_SERVICE as KEYRING_SERVICE
from ..account._account_login import AccountCredentials as AccountCredentials
from ..account._account_login import account_file as account_file
from ..account._account_login import forget_account_login as forget_account_login
from ..account._account_login import keyring_user as keyring_user
from ..account._account_login import load_account_credentials as load_account_credentials
from ..account._account_login import normalize_hub_url as normalize_hub_url
from ..account._account_login import save_account_login as save_account_login
from ..account._account_login import saved_hub_url as saved_hub_url
from ..client._clients import INHERITED_ENV as INHERITED_ENV
from ..client._clients import STDERR_LOGGER as STDERR_LOGGER
from ..client._listing_cache import DEFAULT_LISTING_TTL as DEFAULT_LISTING_TTL
from ..client._listing_cache import ListingCache as ListingCache
from ..client._passthrough import UpstreamResult as UpstreamResult
from ..client._sandbox import sandbox_unavailable as sandbox_unavailable
from ..client._session_runner import ConnectionStatus as ConnectionStatus
from ..client._tasks import TASK_METHODS as TASK_METHODS
from ..client._tool_results import holds_long_text as holds_long_text
from ..client._tracing import UPSTREAM as UPSTREAM
from ..client._tracing import Upstream as Upstream
from ..client._tracing import client_span_attributes as client_span_attributes
from ..client._tracing import set_client_observer as set_client_observer
from ..client._tracing import set_tracing as set_tracing
from ..client._tracing import tracing_enabled as tracing_enabled
from ..client._translate import REOPEN_NOTE as REOPEN_NOTE
from ..client._translate import transport_failure as transport_failure
from ..client._upstream_changes import Change as Change
from ..pool._offer_calls import Freshness as Freshness
from ..pool._offer_merge import Merged as Merged
from ..pool._offerings import Offerings as Offerings
from ..pool._pool import AuthFor as AuthFor
from ..project._env_check import unset_variables as unset_variables
from ..project._expand import expand_map as expand_map
from ..project._loader import RESERVED_TOOL_NAMES as RESERVED_TOOL_NAMES
from ..project._loader import Extension as Extension
from ..project._names import NAME_RULE as NAME_RULE
from ..project._names import is_valid_tool_name as is_valid_tool_name
from ..project._pin_guard import PinGuard as PinGuard
from ..project._pin_guard import pinnable as pinnable
from ..project._pins import LOCK_FILE as LOCK_FILE
from ..project._pins import Drift as Drift
from ..project._pins import Lock as Lock
from ..project._pins import read_lock as read_lock
from ..project._pins import write_lock as write_lock
from ..project._servers import Selector as Selector
from ..project._servers import element_lines as element_lines
from ..project._servers import unmatched as unmatched
from ..serving._pin_snapshot import compare as compare_pins
from ..serving._pin_snapshot import definition_diff as definition_diff
from ..serving._pin_snapshot import lock_of as lock_of
from ..serving._pin_snapshot import snapshot as pin_snapshot
from ..turns._toolset import observed as observed

__all__ = [
    "ACCOUNT_URL_ENV",
    "API_KEY_ENV",
    "DEFAULT_LISTING_TTL",
    "HUB_CONNECTORS_PATH",
    "INHERITED_ENV",
    "KEYRING_SERVICE",
    "LOCK_FILE",
    "NAME_RULE",
    "PLAIN",
    "REOPEN_NOTE",
    "RESERVED_TOOL_NAMES",
    "STDERR_LOGGER",
    "TASK_METHODS",
    "UPSTREAM",
    "AccountCheck",
    "AccountCredentials",
    "AuthFor",
    "CallChannel",
    "CallContext",
    "CallRequest",
    "Change",
    "ConnectionStatus",
    "Connector",
    "Drift",
    "Extension",
    "Freshness",
    "InputHandler",
    "ListingCache",
    "Lock",
    "Merged",
    "NotificationsOnly",
    "Offerings",
    "PinGuard",
    "RedactingFilter",
    "Selector",
    "SignInRequired",
    "Upstream",
    "UpstreamResult",
    "account_file",
    "calling",
    "canonical_uri",
    "check_account_servers",
    "client_span_attributes",
    "compare_pins",
    "current_call",
    "definition_diff",
    "element_lines",
    "expand_map",
    "forget_account_login",
    "holds_long_text",
    "is_valid_tool_name",
    "keyring_user",
    "load_account_credentials",
    "lock_of",
    "log_level_value",
    "normalize_hub_url",
    "not_offered",
    "observed",
    "pin_snapshot",
    "pinnable",
    "read_lock",
    "redact",
    "remember_secret",
    "sandbox_unavailable",
    "save_account_login",
    "saved_hub_url",
    "set_client_observer",
    "set_tracing",
    "shown_arguments",
    "shown_command",
    "shown_url",
    "tracing_enabled",
    "transport_failure",
    "unmatched",
    "unset_variables",
    "write_lock",
]
