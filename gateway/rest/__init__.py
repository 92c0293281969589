"""The JSON API's routes: tools, sessions, discovery."""
