"""`Secret`: a string that never shows itself in a `repr`, `str`, log line or traceback."""

from __future__ import annotations

__all__ = ["Secret"]


class Secret:
    """Wraps a credential (token, key, header value); read it only with `.reveal()` at the wire."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The plain value; call this only where the value goes onto the wire or into a 0600 store."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __format__(self, spec: str) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        import hmac

        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("a Secret cannot be pickled; store it with a token store instead")
