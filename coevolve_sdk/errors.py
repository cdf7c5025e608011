"""Errors a user can act on. Each message says what was wrong and how to fix it."""

from __future__ import annotations


class CoEvolveError(Exception):
    """Base of the SDK's own errors; the CLI prints these without a traceback."""


class ConfigError(CoEvolveError):
    pass


class PluginError(CoEvolveError):
    pass


class PluginHookError(PluginError):
    """A plugin's lifecycle hook raised: the message names the plugin, its package, the hook and
    the plugin's own line, because the traceback alone would point into pluggy and the loop."""


class UnknownComponentError(PluginError):
    pass


class DuplicateComponentError(PluginError):
    pass


class ResumeError(CoEvolveError):
    pass


class BudgetExhausted(CoEvolveError):
    """The teacher's budget (calls, tokens or US dollars) is spent.

    Raised by an LLM teacher (``coevolve_litellm.LiteLLMTeacher``, say) *before* it would
    send a request that the budget no longer allows, from any of ``reflect``, ``explore``,
    ``abstract`` or ``judge``. It is the one teacher failure that is not swallowed: every other
    problem (rate limits, timeouts, malformed replies) is counted and yields empty results.

    The evolution stage catches it to stop synthesis cleanly: candidates already proposed are
    still validated and admitted, no further signals are sent to the teacher, and training goes
    on. Once raised, the same teacher raises it again on every later call until its budget is
    raised (``LiteLLMTeacher.reset_budget``), so catching it once per round is enough. It lives
    in the core because the core's evolution stage catches it, whichever teacher raised it.

    Attributes: ``resource`` ("calls", "tokens" or "cost_usd"), ``limit`` and ``used``.
    """

    def __init__(self, resource: str, limit: float, used: float) -> None:
        self.resource = resource
        self.limit = limit
        self.used = used
        super().__init__(
            f"teacher budget exhausted: {resource} used {used:g} of {limit:g}. "
            f"Raise teacher.options.budget.max_{'cost_usd' if resource == 'cost_usd' else resource} to synthesise more."
        )

    def __reduce__(self) -> tuple[type, tuple[str, float, float]]:  # keeps it picklable across processes
        return (type(self), (self.resource, self.limit, self.used))
