"""Errors a user can act on. Each message says what was wrong and how to fix it."""

from __future__ import annotations


class CoEvolveError(Exception):
    """Base of the SDK's own errors; the CLI prints these without a traceback."""


class ConfigError(CoEvolveError):
    pass


class PluginError(CoEvolveError):
    pass


class UnknownComponentError(PluginError):
    pass


class DuplicateComponentError(PluginError):
    pass


class ResumeError(CoEvolveError):
    pass
