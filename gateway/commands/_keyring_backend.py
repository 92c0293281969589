"""What the selected `keyring` backend really is, in words, so a command never says "the OS keyring"
for keyrings.alt's plaintext file."""

from __future__ import annotations

import keyring
import keyring.backend

__all__ = ["describe_keyring"]


def describe_keyring() -> str:
    """E.g. "the OS keyring (SecretService)"; for a keyrings.alt file backend: which file, and whether encrypted."""
    backend: keyring.backend.KeyringBackend = keyring.get_keyring()
    kind = type(backend)
    path = getattr(backend, "file_path", None)
    if kind.__module__.startswith("keyrings.alt") and isinstance(path, str):
        if "Plaintext" in kind.__name__:
            return (
                f"keyrings.alt's {kind.__name__}, a file at {path} (base64, NOT encrypted: anyone who can read "
                "that file reads the key; select a real keyring with PYTHON_KEYRING_BACKEND, or use "
                "AGENT_SDK_API_KEY on a server)"
            )
        return f"keyrings.alt's {kind.__name__}, an encrypted file at {path}"
    return f"the OS keyring ({kind.__name__})"
