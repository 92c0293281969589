"""What the gateway needs of `connections` beyond the author API (not for authors)."""
