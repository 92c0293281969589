"""The account hub's routes and its keys."""
