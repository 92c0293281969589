"""OAuth for MCP connections: discovery, registration, PKCE login, token stores and refresh.

Depends on nothing else in this repository (`gateway -> connections -> oauth`).

Serving: `httpx2.AsyncClient(auth=connection_auth(name, url, config, store))`.
Logging in: `await login(name, url, config, store, interaction=open_browser())`.
"""

from ._auth import AuthStats as AuthStats
from ._auth import ConnectionAuth as ConnectionAuth
from ._auth import LoginHandler as LoginHandler
from ._auth import connection_auth as connection_auth
from ._callback import CallbackListener as CallbackListener
from ._caller_grants import CALLER_GRANTS as CALLER_GRANTS
from ._caller_grants import CallerGrants as CallerGrants
from ._caller_grants import UpstreamToken as UpstreamToken
from ._config import OAuthConfig as OAuthConfig
from ._discovery import Challenge as Challenge
from ._discovery import Discovery as Discovery
from ._discovery import ResourceMetadata as ResourceMetadata
from ._discovery import ServerMetadata as ServerMetadata
from ._discovery import parse_www_authenticate as parse_www_authenticate
from ._exceptions import AssertionRefused as AssertionRefused
from ._exceptions import AuthorizationDenied as AuthorizationDenied
from ._exceptions import AuthorizationError as AuthorizationError
from ._exceptions import AuthorizationServerUnreachable as AuthorizationServerUnreachable
from ._exceptions import CallerTokenRequired as CallerTokenRequired
from ._exceptions import DiscoveryError as DiscoveryError
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
from ._file_store import FileTokenStore as FileTokenStore
from ._files import write_private as write_private
from ._grant import ClientRegistration as ClientRegistration
from ._grant import Grant as Grant
from ._grant import StoreKey as StoreKey
from ._grant import TokenSet as TokenSet
from ._home import LocalStore as LocalStore
from ._home import check_store as check_store
from ._home import deployment_store as deployment_store
from ._home import serving_store as serving_store
from ._interaction import Interaction as Interaction
from ._interaction import follow_redirects as follow_redirects
from ._interaction import open_browser as open_browser
from ._interaction import print_url as print_url
from ._keyring_store import KeyringTokenStore as KeyringTokenStore
from ._login import login as login
from ._manage import GrantStatus as GrantStatus
from ._manage import LogoutResult as LogoutResult
from ._manage import grant_status as grant_status
from ._manage import logout as logout
from ._presented import PresentedToken as PresentedToken
from ._presented import present as present
from ._presented import presented as presented
from ._redirect_login import LoginStart as LoginStart
from ._redirect_login import finish_login as finish_login
from ._redirect_login import start_login as start_login
from ._redis_store import RedisTokenStore as RedisTokenStore
from ._secret import Secret as Secret
from ._store import TokenStore as TokenStore
from ._text import printable as printable
from ._transport import insecure_transport_warning as insecure_transport_warning

__all__ = [
    "CALLER_GRANTS",
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
    "Secret",
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
    "login",
    "logout",
    "open_browser",
    "parse_www_authenticate",
    "present",
    "presented",
    "print_url",
    "printable",
    "serving_store",
    "start_login",
    "write_private",
]
