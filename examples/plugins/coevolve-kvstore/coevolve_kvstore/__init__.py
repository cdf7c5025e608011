"""A worked example of a CoEvolve environment plugin (see docs/tutorials/environment-plugin.md)."""

from .env import KVStoreEnv

__all__ = ["KVStoreEnv"]
