"""OAuth for MCP connections: discovery, registration, PKCE login, token stores and refresh.

Depends on nothing else in this repository (`gateway -> connections -> oauth`).
"""

from ._config import OAuthConfig as OAuthConfig
from ._secret import Secret as Secret

__all__ = ["OAuthConfig", "Secret"]
