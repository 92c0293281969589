"""`oauth.__all__` is sorted and is exactly the public names the package exports."""

from __future__ import annotations

import oauth


def test_all_is_sorted_and_complete() -> None:
    public = sorted(name for name in vars(oauth) if not name.startswith("_") and not _is_module(name))
    assert oauth.__all__ == sorted(oauth.__all__)
    assert public == oauth.__all__


def test_oauth_imports_nothing_from_connections_or_gateway() -> None:
    import pathlib

    root = pathlib.Path(oauth.__file__).parent
    for path in root.glob("*.py"):
        text = path.read_text()
        assert "from connections" not in text and "import connections" not in text, path
        assert "from gateway" not in text and "import gateway" not in text, path


def _is_module(name: str) -> bool:
    import types

    return isinstance(vars(oauth)[name], types.ModuleType)
