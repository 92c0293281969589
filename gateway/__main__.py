"""`python -m gateway ...`: the same as the `agent-sdk` console script."""

from .cli import entrypoint

entrypoint()
