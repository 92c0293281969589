"""Connection definitions, the project loader and (soon) the client pool and turn builder.

Imports `oauth` only (`gateway -> connections -> oauth`).
"""

from oauth import OAuthConfig as OAuthConfig

from ._definitions import AuthCallback as AuthCallback
from ._definitions import ConnectionDefinition as ConnectionDefinition
from ._definitions import ConnectionKind as ConnectionKind
from ._definitions import Timeouts as Timeouts
from ._definitions import define_connection as define_connection
from ._diagnostics import Diagnostic as Diagnostic
from ._diagnostics import Severity as Severity
from ._exceptions import ConnectionsError as ConnectionsError
from ._exceptions import EnvironmentVariableMissing as EnvironmentVariableMissing
from ._exceptions import ProjectError as ProjectError
from ._exceptions import ToolInputError as ToolInputError
from ._exceptions import TurnBuildError as TurnBuildError
from ._exceptions import TurnProblem as TurnProblem
from ._expand import expand_map as expand_map
from ._loader import RESERVED_TOOL_NAMES as RESERVED_TOOL_NAMES
from ._loader import Extension as Extension
from ._loader import Project as Project
from ._loader import load_project as load_project
from ._names import NAME_RULE as NAME_RULE
from ._names import is_valid_tool_name as is_valid_tool_name
from ._session import SessionInfo as SessionInfo
from ._tools import Effect as Effect
from ._tools import ServerTool as ServerTool
from ._tools import ToolContext as ToolContext
from ._tools import define_tool as define_tool
from ._toolset import ToolOutcome as ToolOutcome
from ._toolset import Toolset as Toolset
from ._toolset import TurnTool as TurnTool
from ._turns import TurnBuilder as TurnBuilder
from ._turns import outcome_from_mcp as outcome_from_mcp

__all__ = [
    "NAME_RULE",
    "RESERVED_TOOL_NAMES",
    "AuthCallback",
    "ConnectionDefinition",
    "ConnectionKind",
    "ConnectionsError",
    "Diagnostic",
    "Effect",
    "EnvironmentVariableMissing",
    "Extension",
    "OAuthConfig",
    "Project",
    "ProjectError",
    "ServerTool",
    "SessionInfo",
    "Severity",
    "Timeouts",
    "ToolContext",
    "ToolInputError",
    "ToolOutcome",
    "Toolset",
    "TurnBuildError",
    "TurnBuilder",
    "TurnProblem",
    "TurnTool",
    "define_connection",
    "define_tool",
    "expand_map",
    "is_valid_tool_name",
    "load_project",
    "outcome_from_mcp",
]
