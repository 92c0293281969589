"""Rate limits and quotas per principal, tool and connection, declared in `agent/limits.toml` (docs/audit.md)."""

from ._limiter import Limiter as Limiter
from ._limiter import LimitsUnavailable as LimitsUnavailable
from ._limiter import RateLimited as RateLimited
from ._limiter import limits_storage as limits_storage
from ._rules import LIMITS_FILE as LIMITS_FILE
from ._rules import LimitRule as LimitRule
from ._rules import LimitsFileError as LimitsFileError
from ._rules import load_limit_rules as load_limit_rules

__all__ = [
    "LIMITS_FILE",
    "LimitRule",
    "Limiter",
    "LimitsFileError",
    "LimitsUnavailable",
    "RateLimited",
    "limits_storage",
    "load_limit_rules",
]
