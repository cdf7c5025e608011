"""Finding and loading plugins, and looking components up by kind and name.

Plugins are Python distributions with an entry point in the ``coevolve`` group::

    [project.entry-points.coevolve]
    kvstore = "coevolve_kvstore.plugin"

Each entry point is loaded on its own, so one plugin that fails to import is reported (with
its name, its distribution and the fix) while every other plugin still loads. Two plugins that
register the same component name are reported the same way; the name stays unusable until one
of them is disabled, and every other name keeps working. A plugin that implements a hook
CoEvolve does not define (a misspelt ``register_enviroments``, say) is rejected as a whole and
reported with the hook's name and the valid ones: pluggy would otherwise never call it, and the
plugin would be silently half-installed.

Environment variables:

* ``COEVOLVE_LOAD_PLUGINS=a,b``: load only these entry points (empty string: none).
* ``COEVOLVE_DISABLE_PLUGINS=a,b``: skip these entry points.
* ``COEVOLVE_PLUGIN_MODULES=pkg.mod,other.mod``: also register these importable modules as
  plugins (handy for a plugin under development, before it is pip-installed).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata as md
import os
import threading
from dataclasses import dataclass, field
from typing import Any

import pluggy

import coevolve_sdk.components.hooks as hooks
from coevolve_sdk.components.base import KINDS, kind as _kind
from coevolve_sdk.errors import DuplicateComponentError, PluginHookError, UnknownComponentError

__all__ = ["Registry", "ComponentInfo", "PluginFailure", "get_registry", "KINDS"]

def _providers_in_clone() -> dict[tuple[str, str], tuple[str, str]]:
    """(kind, name) -> (distribution, folder) for the plugins of a clone of the CoEvolve
    repository that are not necessarily installed.

    Each plugin declares what it provides in its own ``pyproject.toml``
    (``[tool.coevolve.provides]``, e.g. ``policy = ["hf", "tiny"]``), so the core holds no list
    of plugin names: the message for a missing component reads them from the clone that the
    user is in (the working directory) or that the SDK was installed from (editable installs).
    ``tests/architecture/test_core_names_no_plugin.py`` keeps each table equal to what the
    plugin registers.
    """
    import tomllib
    from pathlib import Path

    out: dict[tuple[str, str], tuple[str, str]] = {}
    roots = dict.fromkeys(r.resolve() for r in (Path.cwd(), Path(__file__).resolve().parents[2]))
    for root in roots:
        for pyproject in sorted([*root.glob("plugins/*/pyproject.toml"), *root.glob("examples/plugins/*/pyproject.toml")]):
            try:
                data = tomllib.loads(pyproject.read_text())
            except (OSError, ValueError):
                continue
            provides = data.get("tool", {}).get("coevolve", {}).get("provides", {})
            dist = data.get("project", {}).get("name", pyproject.parent.name)
            for kind, names in provides.items() if isinstance(provides, dict) else ():
                for name in names if isinstance(names, list) else ():
                    out.setdefault((kind, str(name)), (dist, pyproject.parent.relative_to(root).as_posix()))
    return out


@dataclass
class ComponentInfo:
    kind: str
    name: str
    cls: type
    plugin: str
    distribution: str | None = None
    version: str | None = None


@dataclass
class PluginFailure:
    plugin: str
    distribution: str | None
    error: str
    hint: str
    #: raised by a registration hook while the component tables were built (recomputed on
    #: every build), as opposed to a failure to import or register the plugin (kept)
    from_build: bool = False

    def message(self) -> str:
        dist = f" (distribution {self.distribution})" if self.distribution else ""
        return f"Plugin '{self.plugin}'{dist} failed to load: {self.error}. {self.hint}"


def _import_hint(module_name: str, error: BaseException) -> str:
    """The advice for a module that failed to import, fitted to why it failed: only a module
    that cannot be found is a path problem; any other error is in the module's own code."""
    missing = getattr(error, "name", None) if isinstance(error, ModuleNotFoundError) else None
    if missing and (module_name == missing or module_name.startswith(missing + ".")):
        return (f"Python cannot find '{missing}': check the module path, and that the folder holding it is on "
                "PYTHONPATH (or the package is pip-installed) in this Python environment.")
    if missing:
        return f"'{module_name}' was found, but it imports '{missing}', which is not installed."
    import re

    from coevolve_sdk.components.blame import user_frames

    where = ""
    for frame in reversed(user_frames(error)):
        m = re.match(r'\s*File "([^"]+)", line (\d+)', frame)
        if m and "importlib" not in m.group(1):
            where = f" ({m.group(1)}:{m.group(2)})"
            break
    return f"'{module_name}' was found; the error is in its code{where}."


@dataclass
class _PluginRecord:
    name: str
    module: Any
    distribution: str | None = None
    version: str | None = None
    source: str = "entry point"


@dataclass
class Registry:
    """A pluggy manager plus the component tables built from its registration hooks."""

    load_entry_points: bool = True
    extra_modules: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pm = pluggy.PluginManager(hooks.PROJECT)
        self.pm.add_hookspecs(hooks)
        self.plugins: dict[str, _PluginRecord] = {}
        self.failures: list[PluginFailure] = []
        self.conflicts: dict[tuple[str, str], list[ComponentInfo]] = {}
        self._components: dict[str, dict[str, ComponentInfo]] | None = None
        self._transient = False
        self._register_module("coevolve_sdk.evolution.builtin", source="built-in", distribution="coevolve-sdk")
        if self.load_entry_points:
            self._load_entry_points()
        mods = [m for m in os.environ.get("COEVOLVE_PLUGIN_MODULES", "").split(",") if m.strip()]
        for mod in [*mods, *self.extra_modules]:
            self.add_module(mod.strip())

    # ------------------------------------------------------------ loading
    def _load_entry_points(self) -> None:
        only_env = os.environ.get("COEVOLVE_LOAD_PLUGINS")
        only = None if only_env is None else {x.strip() for x in only_env.split(",") if x.strip()}
        disabled = {x.strip() for x in os.environ.get("COEVOLVE_DISABLE_PLUGINS", "").split(",") if x.strip()}
        for ep in sorted(md.entry_points(group=hooks.PROJECT), key=lambda e: e.name):
            if only is not None and ep.name not in only:
                continue
            if ep.name in disabled or ep.name in self.plugins:
                continue
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else None
            version = dist.version if dist is not None else None
            try:
                module = ep.load()
            except BaseException as e:  # SystemExit or KeyboardInterrupt in a plugin must not kill the host
                if isinstance(e, KeyboardInterrupt):
                    raise
                self.failures.append(
                    PluginFailure(
                        plugin=ep.name,
                        distribution=dist_name,
                        error=f"importing '{ep.value}' raised {type(e).__name__}: {e}",
                        hint=(
                            f"Fix or reinstall it (pip install --force-reinstall {dist_name or ep.name}), "
                            f"or skip it with COEVOLVE_DISABLE_PLUGINS={ep.name}."
                        ),
                    )
                )
                continue
            self._register(module, _PluginRecord(ep.name, module, dist_name, version))

    def _register_module(self, module_name: str, source: str, distribution: str | None = None) -> None:
        module = importlib.import_module(module_name)
        self._register(module, _PluginRecord(module_name, module, distribution, None, source))

    def add_module(self, module_name: str) -> None:
        """Register an importable module as a plugin (COEVOLVE_PLUGIN_MODULES, config ``plugins``)."""
        if module_name in self.plugins:
            return
        try:
            module = importlib.import_module(module_name)
        except Exception as e:
            self.failures.append(PluginFailure(plugin=module_name, distribution=None,
                                               error=f"importing it raised {type(e).__name__}: {e}", hint=_import_hint(module_name, e)))
            return
        self._register(module, _PluginRecord(module_name, module, None, None, "module"))

    def _register(self, module: Any, record: _PluginRecord) -> None:
        try:
            self.pm.register(module, name=record.name)
        except Exception as e:
            self.failures.append(
                PluginFailure(record.name, record.distribution, f"registering it with pluggy raised {type(e).__name__}: {e}",
                              "Check its @hookimpl function names and signatures against docs/plugins/hooks.md.")
            )
            return
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as e:
            # every plugin registered before passed this check, so the culprit is this one
            unknown = self._unknown_hooks(record.name)
            self.pm.unregister(name=record.name)
            self.failures.append(self._unknown_hook_failure(record, unknown, str(e)))
            return
        self.plugins[record.name] = record
        self._components = None

    def _unknown_hooks(self, plugin_name: str) -> list[str]:
        """Hook implementations of ``plugin_name`` that match no hook specification."""
        out = []
        for name, caller in vars(self.pm.hook).items():
            if name.startswith("_") or caller.has_spec():
                continue
            if any(impl.plugin_name == plugin_name and not impl.optionalhook for impl in caller.get_hookimpls()):
                out.append(name)
        return sorted(out)

    def _unknown_hook_failure(self, record: _PluginRecord, unknown: list[str], fallback: str) -> PluginFailure:
        valid = sorted(n for n in vars(self.pm.hook) if not n.startswith("_") and getattr(self.pm.hook, n).has_spec())
        if not unknown:
            return PluginFailure(record.name, record.distribution, f"pluggy rejected it: {fallback}",
                                 f"Valid hook names: {', '.join(valid)}.")
        parts = []
        for name in unknown:
            close = difflib.get_close_matches(name, valid, n=1)
            parts.append(f"'{name}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        which = "hook" if len(unknown) == 1 else "hooks"
        return PluginFailure(
            record.name,
            record.distribution,
            f"it implements the {which} {', '.join(parts)}, which CoEvolve does not define, so the plugin was not loaded",
            f"Rename the @hookimpl function to one of the valid hook names ({', '.join(valid)}; see "
            f"docs/plugins/hooks.md), or skip the plugin with COEVOLVE_DISABLE_PLUGINS={record.name}.",
        )

    # ------------------------------------------------------------ components
    def _build(self) -> dict[str, dict[str, ComponentInfo]]:
        tables: dict[str, dict[str, ComponentInfo]] = {k.name: {} for k in KINDS}
        self.conflicts = {}
        # hook failures are recomputed on every build; import failures of entry points stay
        self.failures = [f for f in self.failures if not f.from_build]
        self._transient = False
        for k in KINDS:
            kind, hook_name = k.name, k.hook
            hook = getattr(self.pm.hook, hook_name)
            for impl in hook.get_hookimpls():
                rec = self.plugins.get(impl.plugin_name)
                try:
                    classes = impl.function() or []
                except Exception as e:
                    # an ImportError here is usually a plugin module imported half-way (the user
                    # imported the plugin before coevolve_sdk): try again on the next lookup
                    self._transient = self._transient or isinstance(e, ImportError)
                    self.failures.append(
                        PluginFailure(impl.plugin_name, rec.distribution if rec else None,
                                      f"its {hook_name}() hook raised {type(e).__name__}: {e}",
                                      f"Fix the plugin or skip it with COEVOLVE_DISABLE_PLUGINS={impl.plugin_name}.",
                                      from_build=True)
                    )
                    continue
                for cls in classes:
                    name = getattr(cls, "name", "") or ""
                    if not name:
                        self.failures.append(
                            PluginFailure(impl.plugin_name, rec.distribution if rec else None,
                                          f"{hook_name}() returned {cls!r} without a 'name'",
                                          "Give the class a unique 'name' class attribute.", from_build=True)
                        )
                        continue
                    info = ComponentInfo(kind, name, cls, impl.plugin_name,
                                         rec.distribution if rec else None, rec.version if rec else None)
                    if name in tables[kind]:
                        self.conflicts.setdefault((kind, name), [tables[kind][name]]).append(info)
                    else:
                        tables[kind][name] = info
        for (kind, name) in self.conflicts:
            tables[kind].pop(name, None)
        return tables

    @property
    def components(self) -> dict[str, dict[str, ComponentInfo]]:
        if self._components is None:
            tables = self._build()
            if self._transient:
                return tables
            self._components = tables
        return self._components

    def names(self, kind: str) -> list[str]:
        return sorted(self.components[kind])

    def get(self, kind: str, name: str) -> type:
        _kind(kind)  # ValueError naming the kinds
        table = self.components[kind]
        if name in table:
            return table[name].cls
        if (kind, name) in self.conflicts:
            owners = self.conflicts[(kind, name)]
            who = ", ".join(f"'{o.plugin}'" + (f" ({o.distribution})" if o.distribution else "") for o in owners)
            raise DuplicateComponentError(
                f"The {kind} name '{name}' is registered by more than one plugin: {who}. "
                f"Uninstall one of them or disable it with COEVOLVE_DISABLE_PLUGINS=<plugin>; "
                f"names must be unique within a kind."
            )
        known = ", ".join(sorted(table)) or "none"
        msg = f"No {kind} named '{name}' is registered. Known {kind} names: {known}."
        dist, src = _providers_in_clone().get((kind, name), (None, ""))
        if dist is not None:
            msg += (f" The {kind} '{name}' comes with the package {dist}: install it (from a clone of the "
                    f"CoEvolve repository: pip install ./{src}), or, if it is installed, check that "
                    f"COEVOLVE_LOAD_PLUGINS / COEVOLVE_DISABLE_PLUGINS do not skip it.")
        if self.failures:
            msg += " Some plugins failed to load and may be the one you need: " + " ".join(f.message() for f in self.failures)
        elif dist is None:
            msg += " Install the plugin that provides it (see `coevolve plugins`) or correct the name."
        raise UnknownComponentError(msg)

    def info(self, kind: str, name: str) -> ComponentInfo:
        self.get(kind, name)
        return self.components[kind][name]

    # ------------------------------------------------------------ gymnasium
    def register_gym_envs(self) -> list[str]:
        """Register every environment with gymnasium as ``coevolve/<name>-v<version>``."""
        import gymnasium

        ids = []
        for info in self.components["environment"].values():
            cls = info.cls
            gym_id = cls.gym_id()
            if gym_id not in gymnasium.registry:
                gymnasium.register(id=gym_id, entry_point=cls, disable_env_checker=False)
            ids.append(gym_id)
        return ids

    @property
    def hook(self) -> Any:
        return self.pm.hook

    def call_hook(self, hook_name: str, **kwargs: Any) -> list[Any]:
        """Call every plugin's implementation of a lifecycle hook, in pluggy's order (the plugin
        registered last first), and return their non-None results.

        An implementation that raises stops the call with a ``PluginHookError`` naming the
        plugin, its distribution, the hook and the plugin's own source line (pluggy's own call
        would raise the bare exception from deep inside its caller). Hook wrappers are not part
        of CoEvolve's hook contract (``docs/plugins/hooks.md``) and are refused the same way.
        """
        caller = getattr(self.pm.hook, hook_name)
        results: list[Any] = []
        for impl in reversed(caller.get_hookimpls()):
            rec = self.plugins.get(impl.plugin_name)
            who = f"plugin '{impl.plugin_name}'" + (f" ({rec.distribution})" if rec and rec.distribution else "")
            if impl.hookwrapper or getattr(impl, "wrapper", False):
                raise PluginHookError(f"{who}: its {hook_name}() is a hook wrapper; CoEvolve's lifecycle hooks are plain "
                                      f"observers. Drop hookwrapper/wrapper from its @hookimpl.")
            try:
                res = impl.function(*[kwargs[a] for a in impl.argnames])
            except Exception as e:
                from coevolve_sdk.components.blame import plugin_frames

                frames = plugin_frames(e, impl.function) if hasattr(impl.function, "__module__") else []
                where = ("\n" + "\n".join(frames)) if frames else ""
                raise PluginHookError(f"{who}: its {hook_name}() hook raised {type(e).__name__}: {e}{where}\n"
                                      f"Fix the plugin, or skip it with COEVOLVE_DISABLE_PLUGINS={impl.plugin_name}.") from e
            if res is not None:
                results.append(res)
        return results


_REGISTRY: Registry | None = None
_LOCK = threading.Lock()


def get_registry() -> Registry:
    """The process-wide registry, built on first use."""
    global _REGISTRY
    with _LOCK:
        if _REGISTRY is None:
            _REGISTRY = Registry()
        return _REGISTRY

