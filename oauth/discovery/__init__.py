"""Finding an authorization server: RFC 9728 and RFC 8414 metadata and the HTTP transport."""
