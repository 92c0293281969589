"""Getting and keeping tokens: PKCE logins, refresh, registration, revocation."""
