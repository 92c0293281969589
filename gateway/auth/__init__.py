"""Who is calling: the auth chain, OAuth access tokens, DPoP, roles."""
