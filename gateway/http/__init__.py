"""HTTP plumbing under every route: the ASGI helpers, request ids, checks, proxies."""
