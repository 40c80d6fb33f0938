"""Finds process factories: each installed format's (its descriptor's ``factory``, core/formats.py) and the
dynamic tables' (work of another kind, run on the formats that host it).

A format whose factory fails to load is reported by name with its cause and does not take the others down.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import lru_cache

from airflow_tablemgmt.core.errors import ActionNotSupported
from airflow_tablemgmt.core.factory import ProcessFactory
from airflow_tablemgmt.core.formats import ENTRY_POINT_GROUP, FORMATS, Format
from airflow_tablemgmt.factories.dynamic import DynamicTableProcessFactory

log = logging.getLogger(__name__)

__all__ = [
    "ENTRY_POINT_GROUP",
    "FactoryRegistry",
    "default_factories",
    "factories_for",
    "load_factories",
]


@dataclass
class FactoryRegistry:
    factories: dict[str, ProcessFactory] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def add(self, factory: ProcessFactory) -> None:
        self.factories.setdefault(factory.name, factory)

    def add_format(self, fmt: Format) -> None:
        """The factory ``fmt``'s descriptor names (a class is instantiated), or its error."""
        try:
            obj = fmt.load(fmt.factory)
            factory = obj() if isinstance(obj, type) else obj
            if not isinstance(factory, ProcessFactory):
                raise TypeError(f"{fmt.factory} does not implement the ProcessFactory protocol")
            self.add(factory)
        except Exception as e:  # noqa: BLE001 - a broken format must not take the others down
            self.errors[fmt.name] = f"{type(e).__name__}: {e}"
            log.error("the %s format's factory (%s) failed to load: %s", fmt.name, fmt.factory, e)

    def for_action(self, format: str, action: str) -> ProcessFactory:
        for factory in self.factories.values():
            if action in factory.supported_actions().get(str(format), set()):
                return factory
        supported = sorted(
            {a for f in self.factories.values() for a in f.supported_actions().get(str(format), set())}
        )
        raise ActionNotSupported(
            f"no process factory supports action {action!r} on {format} tables; supported: {', '.join(supported)}"
        )


def builtin_factories() -> FactoryRegistry:
    """The factories of this package's own formats and the dynamic tables' (no other distribution scanned)."""
    registry = FactoryRegistry()
    for fmt in FORMATS.builtin():
        registry.add_format(fmt)
    registry.add(DynamicTableProcessFactory())
    registry.errors.update(FORMATS.errors)
    return registry


def load_factories() -> FactoryRegistry:
    """Every installed format's factory (plugins included) and the dynamic tables'."""
    registry = builtin_factories()
    for fmt in FORMATS.all():
        if fmt.name not in registry.factories and fmt.name not in registry.errors:
            registry.add_format(fmt)
    registry.errors.update(FORMATS.errors)
    return registry


@lru_cache(maxsize=1)
def default_factories() -> FactoryRegistry:
    return load_factories()


def factories_for(format: str, action: str) -> FactoryRegistry:
    """A registry that runs ``action`` on ``format`` tables as :func:`default_factories` would.

    When one of this package's formats supports the action, no plugin could be chosen and other
    distributions are not scanned (start-up time of each run, and a broken plugin's error in the log of a
    run that never uses it). Otherwise: :func:`default_factories`.
    """
    builtins = builtin_factories()
    if any(action in f.supported_actions().get(str(format), set()) for f in builtins.factories.values()):
        return builtins
    return default_factories()
