"""A turn's toolset: the builder, its tools and their outcomes."""
