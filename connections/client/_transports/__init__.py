"""The wires a client speaks: a stdio child and the hand-written HTTP/1 connection."""
