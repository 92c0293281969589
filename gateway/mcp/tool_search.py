"""The ranking behind discovery mode's `search_tools`: SQLite FTS5's BM25 over the tools one caller may see.

`ToolIndex(tools)` indexes each tool's name (split into words: `read_text_file` is `read text file`),
title, description and argument names (with their descriptions) in an in-memory FTS5 table with the
Porter stemmer, and `search(query, limit)` ranks them with FTS5's `bm25()`, the name weighted above the
title, the title above the arguments and the description. A query is a task in plain words: its words
are OR-ed (FTS5's default is AND), so any word may match and BM25 weighs the rare ones.

An index is built from exactly the tools one caller may see (after the policy), never from a larger
listing: a hidden tool is not in it, so it is neither returned nor counted, and does not even weigh in
the ranking (its words are not in BM25's document frequencies). `IndexCache` keeps the indexes of the
last listings, keyed by each tool's name, text and the identity of its schema (the listing cache's object, which
every build of the toolset reuses): an upstream's `notifications/tools/list_changed` drops the listing, the next
listing brings new objects, and so a new index.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cachetools import LRUCache

from connections import TurnTool

__all__ = ["IndexCache", "ToolIndex", "words_of"]

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|[0-9]+|[a-z]+")
_STOP = frozenset(
    "a an and are as at be by can do does for from get give how i in is it me my of on or please show that the "
    "this to tool use using want what which with you your".split()
)
_WEIGHTS = (3.0, 2.0, 1.0, 1.0)  # name, title, description, arguments
# Words a task says for what tool definitions usually call otherwise (general software vocabulary, not
# any one catalog's): a query word also matches its counterparts.
_ALIASES: dict[str, tuple[str, ...]] = {
    "folder": ("directory",), "directory": ("folder",), "history": ("log",), "compare": ("diff",),
    "difference": ("diff",), "differences": ("diff",), "rename": ("move",), "delete": ("remove",),
    "remove": ("delete",), "find": ("search",), "lookup": ("search",), "open": ("read",), "save": ("write",),
    "modify": ("edit",), "change": ("edit",), "picture": ("image",), "photo": ("image",), "zip": ("compress",),
    "now": ("current",), "timezone": ("time",), "undo": ("reset",), "switch": ("checkout",),
}  # fmt: skip


def words_of(text: str) -> list[str]:
    """The lower-case words of `text`, snake_case and camelCase split (`readTextFile` -> read, text, file)."""
    return [w.lower() for w in _WORD.findall(text)]


def _arguments(schema: Mapping[str, Any]) -> str:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return ""
    parts: list[str] = []
    for name, spec in properties.items():
        parts.append(" ".join(words_of(str(name))))
        if isinstance(spec, Mapping) and isinstance(spec.get("description"), str):
            parts.append(str(spec["description"]))
    return " ".join(parts)


class ToolIndex:
    """An FTS5 index of `tools` (module docstring). Safe to search from any thread (one lock)."""

    __slots__ = ("_db", "_lock", "tools")

    def __init__(self, tools: Sequence[TurnTool]) -> None:
        self.tools = tuple(tools)
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._lock = threading.Lock()
        self._db.execute(
            "CREATE VIRTUAL TABLE tools USING fts5(name, title, description, arguments, tokenize='porter unicode61')"
        )
        self._db.executemany(
            "INSERT INTO tools(rowid, name, title, description, arguments) VALUES (?, ?, ?, ?, ?)",
            (
                (i, " ".join(words_of(t.name)), t.title or "", t.description or "", _arguments(t.input_schema))
                for i, t in enumerate(self.tools)
            ),
        )

    def search(self, query: str, limit: int = 5) -> list[TurnTool]:
        """The best `limit` tools for `query`, best first; none when no word of it matches."""
        asked = [w for w in words_of(query) if w not in _STOP]
        terms = list(dict.fromkeys([*asked, *(a for w in asked for a in _ALIASES.get(w, ()))]))
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid FROM tools WHERE tools MATCH ? ORDER BY bm25(tools, ?, ?, ?, ?) LIMIT ?",
                (match, *_WEIGHTS, limit),
            ).fetchall()
        return [self.tools[row[0]] for row in rows]


class IndexCache:
    """The indexes of the last `size` distinct tool sets, keyed by their objects' identity (module docstring)."""

    __slots__ = ("_kept", "_lock")

    def __init__(self, size: int = 32) -> None:
        self._kept: LRUCache[tuple[tuple[str, int, str | None, str], ...], ToolIndex] = LRUCache(maxsize=size)
        self._lock = threading.Lock()

    def index(self, tools: Iterable[TurnTool]) -> ToolIndex:
        """The index of exactly `tools` (sorted by name), built on first use. The index holds the tools (and
        their schemas), so the ids in its key are not reused while it is kept."""
        ordered = sorted(tools, key=lambda t: t.name)
        # A listing builds new `TurnTool`s but keeps the listing cache's schema objects: those say "same listing".
        key = tuple((t.name, id(t.input_schema), t.title, t.description) for t in ordered)
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None:
            return kept
        built = ToolIndex(ordered)
        with self._lock:
            self._kept[key] = built
        return built
