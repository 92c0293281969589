"""Where grants live: a file, the keyring, Redis."""
