"""Dynamic tables (FLIP-435): the definition and states (:mod:`.spec`), Java/Flink date patterns
(:mod:`.date_patterns`), the query's tokenizer and cycle finder (:mod:`.query`), and the refresh
request <-> DAG-run conf (:mod:`.refresh`).

This face re-exports the names importers use, lazily: importing ``core.dynamic.refresh`` (the
lifecycle's factory does) does not build the pydantic model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tablemgmt.core.dynamic.date_patterns import DateFormatter, partition_values, zone
    from airflow_tablemgmt.core.dynamic.query import (
        check_query,
        find_cycle,
        named_tables,
        referenced_tables,
    )
    from airflow_tablemgmt.core.dynamic.refresh import REFRESH
    from airflow_tablemgmt.core.dynamic.spec import (
        Column,
        DynamicState,
        DynamicTableSpec,
        PartitionField,
        RefreshAction,
        RefreshMode,
        RefreshTrigger,
        downstream_problem,
        parse_dynamic_table,
    )

_WHERE = {
    "DateFormatter": "date_patterns",
    "partition_values": "date_patterns",
    "zone": "date_patterns",
    "check_query": "query",
    "find_cycle": "query",
    "named_tables": "query",
    "referenced_tables": "query",
    "REFRESH": "refresh",
    "Column": "spec",
    "DynamicState": "spec",
    "DynamicTableSpec": "spec",
    "PartitionField": "spec",
    "RefreshAction": "spec",
    "RefreshMode": "spec",
    "RefreshTrigger": "spec",
    "downstream_problem": "spec",
    "parse_dynamic_table": "spec",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Column",
    "DateFormatter",
    "DynamicState",
    "DynamicTableSpec",
    "PartitionField",
    "REFRESH",
    "RefreshAction",
    "RefreshMode",
    "RefreshTrigger",
    "check_query",
    "downstream_problem",
    "find_cycle",
    "named_tables",
    "parse_dynamic_table",
    "partition_values",
    "referenced_tables",
    "zone",
]
