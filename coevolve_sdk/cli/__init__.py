"""The `coevolve` command line."""
