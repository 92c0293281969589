"""`make_runner(name)`: the runner `--runner NAME` selects."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ._protocol import TurnRunner
from .deterministic import DeterministicRunner

__all__ = ["RUNNERS", "make_runner"]

RUNNERS = ("deterministic", "openai")


def make_runner(name: str, environ: Mapping[str, str] | None = None) -> TurnRunner:
    """Raises `ValueError` for an unknown name, or (openai) for missing environment settings."""
    if name == "deterministic":
        return DeterministicRunner()
    if name == "openai":
        from .openai import OpenAIRunner

        return OpenAIRunner.from_env(os.environ if environ is None else environ)
    raise ValueError(f"unknown runner {name!r}; choose one of: {', '.join(RUNNERS)}")
