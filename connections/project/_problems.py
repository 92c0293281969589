"""`Problem`: a finding recorded by a `define_*` call, before the loader knows the file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Problem"]


@dataclass(frozen=True, slots=True)
class Problem:
    code: str
    message: str
    severity: Literal["error", "warning"] = "error"
    where: str | None = None
    """The element of the definition it is about (`tools[2]`), when the loader can find its line."""
