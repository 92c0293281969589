"""The account hub: its login and the connectors linked on it."""
