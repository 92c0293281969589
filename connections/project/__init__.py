"""The project: connection and tool definitions, the loader, validation and the lock file."""
