"""The pooled clients: one per connection (and per identity), listings and offerings."""
