"""OAuth for MCP connections: discovery, registration, PKCE login, token stores and refresh.

Depends on nothing else in this repository (`gateway -> connections -> oauth`).

Serving: `httpx2.AsyncClient(auth=connection_auth(name, url, config, store))`.
Logging in: `await login(name, url, config, store, interaction=open_browser())`.
"""

from ._config import OAuthConfig as OAuthConfig
from ._exceptions import AssertionRefused as AssertionRefused
from ._exceptions import AuthorizationDenied as AuthorizationDenied
from ._exceptions import AuthorizationError as AuthorizationError
from ._exceptions import AuthorizationServerUnreachable as AuthorizationServerUnreachable
from ._exceptions import CallerTokenRequired as CallerTokenRequired
from ._exceptions import DiscoveryError as DiscoveryError
from ._exceptions import DpopMismatch as DpopMismatch
from ._exceptions import DpopNonceLoop as DpopNonceLoop
from ._exceptions import InsecureTransport as InsecureTransport
from ._exceptions import InsufficientScope as InsufficientScope
from ._exceptions import InvalidClient as InvalidClient
from ._exceptions import InvalidGrant as InvalidGrant
from ._exceptions import InvalidTarget as InvalidTarget
from ._exceptions import IssuerMismatch as IssuerMismatch
from ._exceptions import KeyringUnavailable as KeyringUnavailable
from ._exceptions import LoginRequired as LoginRequired
from ._exceptions import LoginTimeout as LoginTimeout
from ._exceptions import OAuthError as OAuthError
from ._exceptions import PkceUnsupported as PkceUnsupported
from ._exceptions import RegistrationError as RegistrationError
from ._exceptions import StateMismatch as StateMismatch
from ._exceptions import StoreCorrupt as StoreCorrupt
from ._exceptions import StoreError as StoreError
from ._exceptions import TokenError as TokenError
from ._grant import ClientRegistration as ClientRegistration
from ._grant import Grant as Grant
from ._grant import StoreKey as StoreKey
from ._grant import TokenSet as TokenSet
from .discovery._discovery import Challenge as Challenge
from .discovery._discovery import Discovery as Discovery
from .discovery._discovery import ResourceMetadata as ResourceMetadata
from .discovery._discovery import ServerMetadata as ServerMetadata
from .discovery._discovery import parse_www_authenticate as parse_www_authenticate
from .discovery._transport import insecure_transport_warning as insecure_transport_warning
from .flows._auth import AuthStats as AuthStats
from .flows._auth import ConnectionAuth as ConnectionAuth
from .flows._auth import LoginHandler as LoginHandler
from .flows._callback import CallbackListener as CallbackListener
from .flows._caller_grants import CallerGrants as CallerGrants
from .flows._caller_grants import UpstreamToken as UpstreamToken
from .flows._caller_grants import is_caller_grant as is_caller_grant
from .flows._connection_auth import connection_auth as connection_auth
from .flows._interaction import Interaction as Interaction
from .flows._interaction import follow_redirects as follow_redirects
from .flows._interaction import open_browser as open_browser
from .flows._interaction import print_url as print_url
from .flows._login import login as login
from .flows._manage import GrantStatus as GrantStatus
from .flows._manage import LogoutResult as LogoutResult
from .flows._manage import grant_status as grant_status
from .flows._manage import logout as logout
from .flows._presented import PresentedToken as PresentedToken
from .flows._presented import present as present
from .flows._presented import presented as presented
from .flows._redirect_login import LoginStart as LoginStart
from .flows._redirect_login import finish_login as finish_login
from .flows._redirect_login import start_login as start_login
from .stores._file_store import FileTokenStore as FileTokenStore
from .stores._home import LocalStore as LocalStore
from .stores._home import check_store as check_store
from .stores._home import deployment_store as deployment_store
from .stores._home import serving_store as serving_store
from .stores._keyring_store import KeyringTokenStore as KeyringTokenStore
from .stores._redis_store import RedisTokenStore as RedisTokenStore
from .stores._store import TokenStore as TokenStore

__all__ = [
    "AssertionRefused",
    "AuthStats",
    "AuthorizationDenied",
    "AuthorizationError",
    "AuthorizationServerUnreachable",
    "CallbackListener",
    "CallerGrants",
    "CallerTokenRequired",
    "Challenge",
    "ClientRegistration",
    "ConnectionAuth",
    "Discovery",
    "DiscoveryError",
    "DpopMismatch",
    "DpopNonceLoop",
    "FileTokenStore",
    "Grant",
    "GrantStatus",
    "InsecureTransport",
    "InsufficientScope",
    "Interaction",
    "InvalidClient",
    "InvalidGrant",
    "InvalidTarget",
    "IssuerMismatch",
    "KeyringTokenStore",
    "KeyringUnavailable",
    "LocalStore",
    "LoginHandler",
    "LoginRequired",
    "LoginStart",
    "LoginTimeout",
    "LogoutResult",
    "OAuthConfig",
    "OAuthError",
    "PkceUnsupported",
    "PresentedToken",
    "RedisTokenStore",
    "RegistrationError",
    "ResourceMetadata",
    "ServerMetadata",
    "StateMismatch",
    "StoreCorrupt",
    "StoreError",
    "StoreKey",
    "TokenError",
    "TokenSet",
    "TokenStore",
    "UpstreamToken",
    "check_store",
    "connection_auth",
    "deployment_store",
    "finish_login",
    "follow_redirects",
    "grant_status",
    "insecure_transport_warning",
    "is_caller_grant",
    "login",
    "logout",
    "open_browser",
    "parse_www_authenticate",
    "present",
    "presented",
    "print_url",
    "serving_store",
    "start_login",
]
