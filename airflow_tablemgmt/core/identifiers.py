"""Validated identifiers. Names reach Spark SQL only through these, quoted."""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_tablemgmt.core.errors import InvalidIdentifier

# Matched with fullmatch: ``$`` alone also matches before a trailing newline, so "orders\n"
# would pass and register a second table that prints as lake.sales.orders.
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
IDENTIFIER_RULE = "letters, digits and underscores, starting with a letter or underscore, at most 128 chars"
#: The same rules as JSON-schema patterns, for the REST API's OpenAPI document (a request the document
#: allows is not refused for its identifiers).
IDENTIFIER_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
NAMESPACE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}(\.[A-Za-z_][A-Za-z0-9_]{0,127})*$"
TABLE_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}(\.[A-Za-z_][A-Za-z0-9_]{0,127}){2,}$"


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


#: A namespace of several levels (``a.b``) is written with dots between its levels; the whole fits the
#: store's column of one identifier.
NAMESPACE_MAX_LEN = 128
NAMESPACE_RULE = (
    "one or more levels separated by dots (a multi-level namespace such as sales.eu), each level "
    f"{IDENTIFIER_RULE}, at most {NAMESPACE_MAX_LEN} chars in all"
)


def validate_namespace(value: str, field: str = "namespace") -> str:
    """Return ``value`` if it is a namespace of one or more dot-separated identifiers, else raise naming
    the field and the rule. Iceberg's namespaces are tuples (REST catalogs such as Nessie and Polaris
    nest them); a one-level namespace is the common case and is written as before."""
    if (
        not isinstance(value, str)
        or len(value) > NAMESPACE_MAX_LEN
        or not all(_IDENT.fullmatch(level) for level in value.split("."))
    ):
        raise InvalidIdentifier(f"{field}: {value!r} is not a valid namespace ({NAMESPACE_RULE})")
    return value


@dataclass(frozen=True, order=True)
class TableIdentifier:
    """``catalog.namespace.table``; the catalog and the table one validated identifier each, the namespace
    one or more (``lake.sales.eu.orders``: catalog ``lake``, namespace ``sales.eu``, table ``orders``)."""

    catalog: str
    namespace: str
    name: str

    def __post_init__(self) -> None:
        validate_identifier(self.catalog, "catalog")
        validate_namespace(self.namespace, "namespace")
        validate_identifier(self.name, "name")

    @classmethod
    def parse(cls, text: str) -> TableIdentifier:
        """The first dot-separated part is the catalog, the last the table, everything between the namespace."""
        parts = text.split(".") if isinstance(text, str) else []
        if len(parts) < 3:
            raise InvalidIdentifier(
                f"table: {text!r} must be written catalog.namespace.table (a namespace of several levels "
                "is written with dots too: catalog.level1.level2.table)"
            )
        return cls(parts[0], ".".join(parts[1:-1]), parts[-1])

    def __str__(self) -> str:
        return f"{self.catalog}.{self.namespace}.{self.name}"

    @property
    def namespace_parts(self) -> tuple[str, ...]:
        """The namespace's levels, as Iceberg's ``Namespace`` (and pyiceberg's identifier tuples) hold them."""
        return tuple(self.namespace.split("."))

    @property
    def namespace_path(self) -> str:
        """The namespace as directories (``a/b``): where a hadoop catalog keeps its tables."""
        return "/".join(self.namespace_parts)

    @property
    def quoted(self) -> str:
        """Fully quoted for Spark SQL, each part on its own: `catalog`.`a`.`b`.`table`."""
        return ".".join(quote(p) for p in (self.catalog, *self.namespace_parts, self.name))

    @property
    def in_catalog(self) -> str:
        """The table within its catalog as Iceberg procedures expect it in their ``table =>`` argument:
        ``namespace.table``, each part quoted when the namespace has several levels (Spark parses the
        argument as a multi-part identifier)."""
        if len(self.namespace_parts) == 1:
            return f"{self.namespace}.{self.name}"
        return ".".join(quote(p) for p in (*self.namespace_parts, self.name))
