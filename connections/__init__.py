"""Connections: define them, load a project, pool their clients and build each turn's toolset.

The author API and the exception tree. What the gateway needs beyond it is in `connections.serving`.
Imports `oauth` only (`gateway -> connections -> oauth`).
"""

from oauth import OAuthConfig as OAuthConfig

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
from ._exceptions import ToolInputError as ToolInputError
from ._exceptions import TurnBuildError as TurnBuildError
from ._exceptions import TurnProblem as TurnProblem
from ._exceptions import UnknownConnection as UnknownConnection
from ._exceptions import UnknownTool as UnknownTool
from ._exceptions import UpstreamError as UpstreamError
from ._exceptions import UpstreamTimeout as UpstreamTimeout
from .account._account_login import AccountSetupError as AccountSetupError
from .client._identity import acting_for as acting_for
from .client._restart import RestartPolicy as RestartPolicy
from .client._tasks import ToolTask as ToolTask
from .client._warm import WarmProgress as WarmProgress
from .host._host import HostMcp as HostMcp
from .pool._pool import ClientPool as ClientPool
from .project._define import define_connection as define_connection
from .project._definitions import AuthCallback as AuthCallback
from .project._definitions import ConnectionDefinition as ConnectionDefinition
from .project._definitions import ConnectionKind as ConnectionKind
from .project._diagnostics import Diagnostic as Diagnostic
from .project._diagnostics import Severity as Severity
from .project._limits import Timeouts as Timeouts
from .project._loader import Project as Project
from .project._loader import load_project as load_project
from .project._servers import CuratedServer as CuratedServer
from .project._servers import define_server as define_server
from .project._tools import Effect as Effect
from .project._tools import ServerTool as ServerTool
from .project._tools import ToolContext as ToolContext
from .project._tools import define_tool as define_tool
from .serving._broker import Broker as Broker
from .serving._broker import Host as Host
from .turns._session import SessionInfo as SessionInfo
from .turns._toolset import CallObserver as CallObserver
from .turns._toolset import ToolOutcome as ToolOutcome
from .turns._toolset import Toolset as Toolset
from .turns._toolset import TurnTool as TurnTool
from .turns._turns import TurnBuilder as TurnBuilder

__all__ = [
    "AccountConnectorMissing",
    "AccountError",
    "AccountNotConfigured",
    "AccountSetupError",
    "AccountToolCollision",
    "AccountUnauthorized",
    "AuthCallback",
    "AuthorizationUnavailable",
    "Broker",
    "CallObserver",
    "ClientError",
    "ClientPool",
    "ConnectionDefinition",
    "ConnectionKind",
    "ConnectionUnauthorized",
    "ConnectionUnavailable",
    "ConnectionsError",
    "CuratedServer",
    "Diagnostic",
    "Effect",
    "EnvironmentVariableMissing",
    "Host",
    "HostMcp",
    "NotOffered",
    "OAuthConfig",
    "Project",
    "ProjectError",
    "RestartPolicy",
    "ResultTooLarge",
    "ServerTool",
    "SessionInfo",
    "Severity",
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
    "acting_for",
    "define_connection",
    "define_server",
    "define_tool",
    "load_project",
]
