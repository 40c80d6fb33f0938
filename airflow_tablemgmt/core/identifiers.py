"""Validated identifiers. Names reach Spark SQL only through these, quoted."""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_tablemgmt.core.errors import InvalidIdentifier

# Matched with fullmatch: ``$`` alone also matches before a trailing newline, so "orders\n"
# would pass and register a second table that prints as lake.sales.orders.
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
IDENTIFIER_RULE = "letters, digits and underscores, starting with a letter or underscore, at most 128 chars"


def validate_identifier(value: str, field: str = "name") -> str:
    """Return ``value`` if it is a safe identifier, else raise naming the field and the rule."""
    if not isinstance(value, str) or not _IDENT.fullmatch(value):
        raise InvalidIdentifier(f"{field}: {value!r} is not a valid identifier ({IDENTIFIER_RULE})")
    return value


# Airflow's limits (verified in Airflow 3.3: airflow.models.base.ID_LEN and
# airflow.sdk.definitions.dag.TAG_MAX_LEN; a unit test compares them). The table id is a DAG tag,
# and DAG ids are ``tms__<table id>__<action>`` (core.naming).
AIRFLOW_DAG_ID_MAX_LEN = 250
AIRFLOW_TAG_MAX_LEN = 100


def quote(identifier: str) -> str:
    """Backtick-quote a validated identifier for Spark SQL."""
    return f"`{validate_identifier(identifier)}`"


@dataclass(frozen=True, order=True)
class TableIdentifier:
    """``catalog.namespace.table``; every part a validated identifier."""

    catalog: str
    namespace: str
    name: str

    def __post_init__(self) -> None:
        validate_identifier(self.catalog, "catalog")
        validate_identifier(self.namespace, "namespace")
        validate_identifier(self.name, "name")

    @classmethod
    def parse(cls, text: str) -> TableIdentifier:
        parts = text.split(".")
        if len(parts) != 3:
            raise InvalidIdentifier(f"table: {text!r} must be written catalog.namespace.table")
        return cls(*parts)

    def __str__(self) -> str:
        return f"{self.catalog}.{self.namespace}.{self.name}"

    @property
    def quoted(self) -> str:
        """Fully quoted for Spark SQL: `catalog`.`namespace`.`table`."""
        return ".".join(quote(p) for p in (self.catalog, self.namespace, self.name))

    @property
    def in_catalog(self) -> str:
        """``namespace.table`` as Iceberg procedures expect it in their ``table =>`` argument."""
        return f"{self.namespace}.{self.name}"
