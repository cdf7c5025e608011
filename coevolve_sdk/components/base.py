"""The kinds of component a run is made of, and the base class they all share.

Every component (environment, policy, algorithm, detector, teacher, task sampler) is a class
with a registered ``name`` and an ``Options`` pydantic model, built as
``Cls(options, context)``: ``options`` is an instance of its ``Options`` (or a mapping that
validates into one, or ``None`` for the defaults) and ``context`` is the run's
:class:`~coevolve_sdk.components.context.RunContext` (or ``None`` outside a run, in tests and notebooks).
One base class keeps that rule in one place instead of six slightly different constructors.

``KINDS`` is the one list of component kinds. The registry reads each kind's registration hook
from it, and the config reads where a run config names components of that kind, so adding a
kind is one entry here plus its hook in ``hooks.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from coevolve_sdk.components.context import RunContext

__all__ = ["Component", "ComponentOptions", "ComponentKind", "KINDS", "kind"]


@dataclass(frozen=True)
class ComponentKind:
    """One kind of component.

    ``hook`` is the registration hook plugins implement to offer classes of this kind;
    ``config_path`` is where a run config names them (dotted, e.g. ``pool.sampler``);
    ``many`` says that the config holds a list of them (detectors) rather than one.
    """

    name: str
    hook: str
    config_path: str
    many: bool = False


#: Every kind, in the order a run builds them.
KINDS: tuple[ComponentKind, ...] = (
    ComponentKind("environment", "register_environments", "environment"),
    ComponentKind("policy", "register_policies", "policy"),
    ComponentKind("algorithm", "register_algorithms", "algorithm"),
    ComponentKind("detector", "register_signal_detectors", "detectors", many=True),
    ComponentKind("teacher", "register_teachers", "teacher"),
    ComponentKind("sampler", "register_task_samplers", "pool.sampler"),
)


def kind(name: str) -> ComponentKind:
    """The kind called ``name``; ValueError listing the kinds when there is none."""
    for k in KINDS:
        if k.name == name:
            return k
    raise ValueError(f"unknown component kind '{name}'; kinds are {sorted(k.name for k in KINDS)}")


class ComponentOptions(BaseModel):
    """Options every component accepts: none. Each kind's options model derives from it, so
    an unknown key is an error (a typo never becomes a silently ignored setting)."""

    model_config = ConfigDict(extra="forbid")


class Component:
    """Base of every component class: ``Cls(options, context)``.

    Class attributes: ``name`` (the registered name configs use) and ``Options`` (the pydantic
    model of the keyword options). After construction ``self.options`` is an instance of
    ``Options`` and ``self.context`` the run context (``None`` outside a run).
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[BaseModel]] = ComponentOptions

    def __init__(self, options: BaseModel | Mapping[str, Any] | None = None, context: RunContext | None = None) -> None:
        self.options = type(self).parse_options(options)
        self.context = context

    @classmethod
    def parse_options(cls, options: BaseModel | Mapping[str, Any] | None) -> BaseModel:
        """``options`` as an instance of ``cls.Options``.

        ``None`` gives the defaults; a mapping is validated (pydantic's ValidationError names
        the field on a bad value); an instance of ``Options`` (or of a subclass of it) is kept
        as it is. Any other model is refused: options meant for another component are a bug
        that should surface here, not as a missing attribute later.
        """
        if options is None:
            return cls.Options()
        if isinstance(options, cls.Options):
            return options
        if isinstance(options, Mapping):
            return cls.Options.model_validate(dict(options))
        raise TypeError(
            f"{cls.__name__} takes options as {cls.Options.__name__}, a mapping or None; "
            f"got {type(options).__name__}"
        )
