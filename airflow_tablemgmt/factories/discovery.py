"""Finds process factories: the built-ins plus any registered under the entry-point group.

A plugin that fails to load is reported by name with its cause and does not take the others down.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import entry_points

from airflow_tablemgmt.core.errors import ActionNotSupported
from airflow_tablemgmt.core.factory import ProcessFactory
from airflow_tablemgmt.core.formats import TableFormat
from airflow_tablemgmt.factories.dynamic import DynamicTableProcessFactory
from airflow_tablemgmt.factories.iceberg import IcebergProcessFactory

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "airflow_tablemgmt.process_factories"


@dataclass
class FactoryRegistry:
    factories: dict[str, ProcessFactory] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def add(self, factory: ProcessFactory) -> None:
        self.factories.setdefault(factory.name, factory)

    def for_action(self, format: TableFormat, action: str) -> ProcessFactory:
        for factory in self.factories.values():
            if action in factory.supported_actions().get(format, set()):
                return factory
        supported = sorted(
            {a for f in self.factories.values() for a in f.supported_actions().get(format, set())}
        )
        raise ActionNotSupported(
            f"no process factory supports action {action!r} on {format} tables; supported: {', '.join(supported)}"
        )


def builtin_factories() -> FactoryRegistry:
    """The factories this package ships, in the order :meth:`FactoryRegistry.for_action` asks them."""
    registry = FactoryRegistry()
    registry.add(IcebergProcessFactory())
    registry.add(DynamicTableProcessFactory())
    return registry


def load_factories(group: str = ENTRY_POINT_GROUP) -> FactoryRegistry:
    registry = builtin_factories()
    for ep in entry_points(group=group):
        try:
            obj = ep.load()
            factory = obj() if isinstance(obj, type) else obj
            if not isinstance(factory, ProcessFactory):
                raise TypeError(f"{ep.value} does not implement the ProcessFactory protocol")
            registry.add(factory)
        except Exception as e:  # noqa: BLE001 - a broken plugin must not take the others down
            registry.errors[ep.name] = f"{type(e).__name__}: {e}"
            log.error("process factory plugin %r (%s) failed to load: %s", ep.name, ep.value, e)
    return registry


@lru_cache(maxsize=1)
def default_factories() -> FactoryRegistry:
    return load_factories()


def factories_for(format: TableFormat, action: str) -> FactoryRegistry:
    """A registry that runs ``action`` on ``format`` tables as :func:`default_factories` would.

    The built-in factories come first in every registry and ``for_action`` takes the first that
    supports the action, so when a built-in one does, no plugin could be chosen and the entry points
    are not scanned (every installed distribution's metadata: start-up time of each run, and a broken
    plugin's error in the log of a run that never uses it). Otherwise: :func:`default_factories`.
    """
    builtins = builtin_factories()
    if any(action in f.supported_actions().get(format, set()) for f in builtins.factories.values()):
        return builtins
    return default_factories()
