"""Human approval: calls of tools whose connection says `require_approval` wait for an operator (docs/audit.md)."""

from ._gate import ApprovalGate as ApprovalGate
from ._pending import ApprovalAbandoned as ApprovalAbandoned
from ._pending import ApprovalDecided as ApprovalDecided
from ._pending import ApprovalDenied as ApprovalDenied
from ._pending import ApprovalNotFound as ApprovalNotFound
from ._pending import ApprovalSeparation as ApprovalSeparation
from ._pending import Decision as Decision
from ._pending import PendingApproval as PendingApproval
from ._store import Approvals as Approvals
from ._store import MemoryApprovals as MemoryApprovals
from ._store import RedisApprovals as RedisApprovals

__all__ = [
    "ApprovalAbandoned",
    "ApprovalDecided",
    "ApprovalDenied",
    "ApprovalGate",
    "ApprovalNotFound",
    "ApprovalSeparation",
    "Approvals",
    "Decision",
    "MemoryApprovals",
    "PendingApproval",
    "RedisApprovals",
]
