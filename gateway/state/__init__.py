"""Shared state: Redis, the state key, sealed request state, pending logins."""
