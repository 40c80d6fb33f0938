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


def load_factories(group: str = ENTRY_POINT_GROUP) -> FactoryRegistry:
    registry = FactoryRegistry()
    registry.add(IcebergProcessFactory())
    registry.add(DynamicTableProcessFactory())
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
