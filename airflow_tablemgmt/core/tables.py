"""Declarations: catalogs and tables, validated the same way whether from YAML, REST or the CLI.

(Just over 400 lines: catalogs and tables validated by one set of rules; the next split is the
validation-error formatting into a module of its own.)
"""

from __future__ import annotations

import logging
import posixpath
import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)

from airflow_tablemgmt.core.actions import ACTIONS, PLAIN_TABLE, REFRESH_ON_PLAIN_TABLE, ActionSettings
from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.formats import DEFAULT_FORMAT, FORMATS, known_format
from airflow_tablemgmt.core.identifiers import TableIdentifier, validate_identifier, validate_namespace
from airflow_tablemgmt.core.naming import ACTION_NAME_BOUND, dag_id_length_problem
from airflow_tablemgmt.core.notify import NotifySpec
from airflow_tablemgmt.core.secrets import check_secret_properties
from airflow_tablemgmt.core.storage import check_hadoop_commits
from airflow_tablemgmt.core.text import OWNER_MAX_LEN, WAREHOUSE_MAX_LEN, check_no_nul, check_text
from airflow_tablemgmt.core.uri_credentials import check_uri_credentials

log = logging.getLogger(__name__)
REFRESH_ACTION = "refresh"
# (table, action, override) already warned about in this process: a DAG processor validates the
# same specs on every parse and one warning per process says it.
_WARNED_OVERRIDES: set[tuple[str, str, str]] = set()


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class _Model(BaseModel):
    # defer_build: validators are built on first use, not at import (see core.actions.ActionSettings).
    model_config = ConfigDict(
        alias_generator=_kebab, populate_by_name=True, extra="forbid", frozen=True, defer_build=True
    )


class CatalogType(StrEnum):
    HADOOP = "hadoop"
    REST = "rest"
    HIVE = "hive"
    GLUE = "glue"
    JDBC = "jdbc"


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# Catalog types whose tables live wherever their service says: the service's ``uri`` is what
# identifies them (with ``warehouse``, which a REST catalog may use as a name, not a path).
_URI_CATALOGS = {CatalogType.REST, CatalogType.HIVE, CatalogType.JDBC}
#: A catalog property naming an Airflow connection that supplies the catalog's settings, as the official
#: apache-iceberg provider's ``iceberg`` connection holds them: host = the catalog's URI, login:password =
#: the OAuth2 client credential, extra = further catalog properties. Declared properties win; the
#: connection is read where secrets are resolved (hooks/secrets.py), never stored resolved.
CONNECTION_PROPERTY = "airflow-connection"
_CONNECTION_ID = re.compile(r"[A-Za-z0-9_.-]{1,250}")
# Schemes that reach the same objects under another name.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "wasbs": "wasb"}
WAREHOUSE_RULE = (
    "an absolute path ('/data/warehouse') or a URI with a scheme (file:/, s3://, gs://, abfs://, hdfs://)"
)


def normalize_location(location: str) -> str:
    """One spelling per place: ``/w``, ``/w/``, ``file:/w`` and ``file:///w//`` are all ``/w``;
    ``s3a://b/w`` is ``s3://b/w``. Used to tell whether two catalogs point at one warehouse."""
    text = location.strip()
    if not _SCHEME.match(text):
        return posixpath.normpath(text) if text else ""
    scheme, _, rest = text.partition(":")
    scheme = _SCHEME_ALIASES.get(scheme.lower(), scheme.lower())
    if scheme == "file":
        path = rest[2:] if rest.startswith("//") else rest  # file:///p and file:/p
        return posixpath.normpath("/" + path.lstrip("/"))
    authority, path = (rest[2:].partition("/")[::2]) if rest.startswith("//") else ("", rest.lstrip("/"))
    path = posixpath.normpath("/" + path).rstrip("/") if path else ""
    return f"{scheme}://{authority.lower()}{path}"


# Validation context of a catalog being written (a file, REST, the CLI, the store's upsert): only then are
# credentials inside URIs refused (core.uri_credentials).
WRITING_KEY = "writing_catalog"
WRITING = {WRITING_KEY: True}


class CatalogSpec(_Model):
    """An Iceberg catalog. ``hadoop`` and ``glue`` need ``warehouse``; ``rest``, ``hive`` and
    ``jdbc`` need ``properties.uri``; other Iceberg properties pass through to Spark. Sensitive
    properties (tokens, credentials, ``header.*``) must be references (``conn:``, ``var:``, ``env:``)."""

    name: str
    type: CatalogType = CatalogType.HADOOP
    warehouse: str | None = None
    properties: dict[str, str] = Field(default_factory=dict)

    _name = field_validator("name")(lambda v: validate_identifier(v, "name"))

    @field_validator("warehouse")
    @classmethod
    def _warehouse_text(cls, v: str | None) -> str | None:
        return None if v is None else check_text(v, "warehouse", WAREHOUSE_MAX_LEN)

    @field_validator("properties")
    @classmethod
    def _properties_text(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            check_text(key, "properties", 255)
            check_no_nul(value, f"properties.{key}")
        return v

    @model_validator(mode="after")
    def _complete(self, info: ValidationInfo) -> CatalogSpec:
        kind = self.type.value
        if self.type in (CatalogType.HADOOP, CatalogType.GLUE) and not self.warehouse:
            raise ValueError(f"warehouse: a {kind} catalog needs a warehouse path or URI")
        connection = self.properties.get(CONNECTION_PROPERTY)
        if connection is not None and not _CONNECTION_ID.fullmatch(connection):
            raise ValueError(
                f"properties.{CONNECTION_PROPERTY}: {connection!r} is not an Airflow connection id "
                "(letters, digits, '_', '.', '-'); give the id itself, e.g. iceberg_default"
            )
        if self.type in _URI_CATALOGS and not self.properties.get("uri", "").strip() and connection is None:
            raise ValueError(
                f"properties.uri: a {kind} catalog needs its 'uri' (the {kind} service to reach), or "
                f"properties.{CONNECTION_PROPERTY} naming an Airflow connection whose host is that uri"
            )
        # A REST warehouse may be a name the service resolves; everywhere else it is a location,
        # and a relative one would resolve against whichever directory each worker starts in.
        if self.warehouse is not None and self.type != CatalogType.REST:
            w = self.warehouse.strip()
            if not w or not (w.startswith("/") or _SCHEME.match(w)):
                raise ValueError(f"warehouse: {self.warehouse!r} is relative; allowed: {WAREHOUSE_RULE}")
        check_secret_properties(self.properties)
        if (info.context or {}).get(WRITING_KEY):  # a stored row written earlier still loads (shown redacted)
            if "catalog-impl" in self.properties:
                raise ValueError(
                    "properties.catalog-impl: a custom catalog implementation is not supported: the gate, the "
                    "watchers and health read catalogs without a JVM (pyiceberg), which cannot load a Java class; "
                    "declare type rest for a catalog that speaks Iceberg's REST protocol (Polaris, Gravitino, "
                    "Unity, Nessie's REST API), or hive, jdbc, glue, hadoop"
                )
            check_uri_credentials(self.warehouse, self.properties)
            if self.type == CatalogType.HADOOP:
                check_hadoop_commits(self.warehouse, self.properties)
        return self

    def location_key(self) -> tuple[str, ...]:
        """What identifies the tables this catalog reaches: two catalogs with one key would give
        one physical table two names (and two leases)."""
        warehouse = self.warehouse or self.properties.get("warehouse") or ""
        if self.type in _URI_CATALOGS:
            uri = self.properties.get("uri") or f"connection:{self.properties.get(CONNECTION_PROPERTY, '')}"
            return ("uri", normalize_location(uri), normalize_location(warehouse))
        return (self.type.value, normalize_location(warehouse))


class Owner(StrEnum):
    """Who may change a table's declaration: the YAML file, the store (REST / CLI), or a policy's discovery
    (a table it enrolled; a declaration of the table takes it over, ``store/enrolment.py``)."""

    CODE = "code"
    STORE = "store"
    POLICY = "policy"


_FORMAT_SCHEMA = {
    "type": "string",
    "default": DEFAULT_FORMAT,
    "description": "the table's format: the name of an installed format (built in, or a format plugin's)",
    "examples": [DEFAULT_FORMAT],
}


class TableSpec(_Model):
    """A registered table and the maintenance it gets."""

    catalog: str
    namespace: str
    name: str
    # An open name: any installed format's (core/formats.py), a plugin's included.
    format: Annotated[str, WithJsonSchema(_FORMAT_SCHEMA)] = DEFAULT_FORMAT
    owner: str = Field(default="airflow", description="the DAGs' owner")
    queue: str = Field(default="default", description="Airflow pool (and queue) the jobs run in")
    priority: int = Field(default=1, ge=1, le=1000)
    actions: dict[str, dict[str, Any]] = Field(default_factory=dict)
    notify: NotifySpec | None = Field(default=None, description="notifications (docs/notifications.md)")
    maintenance: Literal["disabled"] | None = Field(
        default=None,
        description="'disabled': no policy maintains this table and it declares no enabled action "
        "(docs/policies.md); absent or 'enabled': maintained by its actions and the matching policies",
    )

    @field_validator("maintenance", mode="before")
    @classmethod
    def _maintenance(cls, v: Any) -> Any:
        if v is None or v == "enabled":
            return None
        if v != "disabled":
            raise ValueError(
                f"maintenance: expected 'disabled' (or 'enabled', the default), got {short_repr(v)}"
            )
        return v

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> Any:
        # Absent unless disabled, so the stored specs of every other table are what they were.
        data = handler(self)
        if isinstance(data, dict) and data.get("maintenance", "") is None:
            del data["maintenance"]
        return data

    @field_validator("catalog", "namespace", "name")
    @classmethod
    def _ident(cls, v: str, info: Any) -> str:
        if info.field_name == "namespace":  # one level or several (sales.eu), as Iceberg's namespaces
            return validate_namespace(v, "namespace")
        return validate_identifier(v, info.field_name)

    @field_validator("format", mode="before")
    @classmethod
    def _format(cls, v: Any) -> str:
        return known_format(v)

    @field_validator("queue")
    @classmethod
    def _queue(cls, v: str) -> str:
        return validate_identifier(v, "queue")

    @field_validator("owner")
    @classmethod
    def _owner(cls, v: str) -> str:
        return check_text(v, "owner", OWNER_MAX_LEN)

    @field_validator("actions")
    @classmethod
    def _actions(cls, v: dict[str, dict[str, Any]], info: Any) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        table_id = ".".join(str(info.data.get(k)) for k in ("catalog", "namespace", "name"))
        plain = bool((info.context or {}).get("plain_table"))
        for name, raw in v.items():
            if name == REFRESH_ACTION and plain:
                raise ValueError(REFRESH_ON_PLAIN_TABLE)
            if name not in ACTIONS:
                plugins = sorted(set(ACTIONS.all_names()) - set(ACTIONS.names()))
                also = f"; from format plugins: {', '.join(plugins)}" if plugins else ""
                raise ValueError(
                    f"unknown action {name!r}; known actions: {', '.join(ACTIONS.names())}{also}"
                )
            fmt = info.data.get("format")
            if fmt is not None:
                problem = FORMATS.unsupported_action(table_id, fmt, name)
                if problem is not None:
                    raise ValueError(problem)
            try:
                settings = ACTIONS.get(name, fmt).settings(raw if raw is not None else {})
            except ValidationError as e:
                # Carry the nested path out of the validator: "<action>.<option>\t<message>" lines.
                raise ValueError("\n".join(_nested(name, e))) from None
            _warn_overrides(table_id, name, settings)
            out[name] = settings.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        return out

    @model_validator(mode="after")
    def _opted_out(self) -> TableSpec:
        enabled = [n for n in sorted(self.actions) if self.actions[n].get("enabled", True)]
        if self.maintenance == "disabled" and enabled:
            raise ValueError(
                f"maintenance: 'disabled' opts the table out of all maintenance, but it enables {', '.join(enabled)}; "
                "allowed: remove those actions (or give them enabled: false), or drop maintenance: disabled"
            )
        return self

    @model_validator(mode="after")
    def _fits_airflow(self) -> TableSpec:
        # Checked against every registered action, not only the enabled ones: enabling one later
        # must not produce a DAG Airflow refuses. Their names are listed only for an id so long that one of
        # them could matter (ACTION_NAME_BOUND).
        names = [*self.actions]
        if dag_id_length_problem(self.id, ["-" * ACTION_NAME_BOUND]) is not None:
            names += ACTIONS.names()
        problem = dag_id_length_problem(self.id, names)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def identifier(self) -> TableIdentifier:
        return TableIdentifier(self.catalog, self.namespace, self.name)

    @property
    def id(self) -> str:
        # The parts were validated when the model was built; building a TableIdentifier would
        # validate them again on every call (DAG building asks for the id several times per table).
        return f"{self.catalog}.{self.namespace}.{self.name}"

    def action_settings(self, name: str) -> ActionSettings:
        return ACTIONS.get(name, self.format).settings(self.actions.get(name, {}))

    def enabled_actions(self) -> list[str]:
        return [name for name, _ in self.enabled_action_settings()]

    def enabled_action_settings(self) -> list[tuple[str, ActionSettings]]:
        """``(action, its validated settings)`` for every enabled action, sorted by name."""
        pairs = ((n, self.action_settings(n)) for n in sorted(self.actions))
        return [(n, s) for n, s in pairs if s.enabled]


def _warn_overrides(table_id: str, action: str, settings: ActionSettings) -> None:
    """Log (WARNING, once per process) every floor an explicit ``allow-below-floor`` overrides.

    Logged where the spec is validated: on registration, on ``apply``, on every DAG-file parse
    (once per process) and on the worker that builds the run's DAG.
    """
    for note in settings.below_floor():
        key = (table_id, action, note)
        if key not in _WARNED_OVERRIDES:
            _WARNED_OVERRIDES.add(key)
            log.warning("table %s, action %s: %s; allowed by allow-below-floor: true", table_id, action, note)


def _nested(prefix: str, err: ValidationError) -> list[str]:
    out = []
    for e in err.errors():
        sub = ".".join(str(p) for p in e.get("loc", ()) if not str(p).startswith("function-"))
        msg = e.get("msg", "").removeprefix("Value error, ")
        field_first = _FIELD_FIRST.match(msg) if not sub else None
        if field_first:  # a model-level check of the action that names its option first
            sub, msg = field_first.group(1), msg[field_first.end() :]
        got = "" if e.get("type") in ("value_error", "missing") else f", got {short_repr(e.get('input'))}"
        out.append(f"{prefix}{'.' + sub if sub else ''}\t{msg}{got}")
    return out


_FIELD_FIRST = re.compile(r"([a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)*): ")


def short_repr(value: Any, limit: int = 200) -> str:
    """``repr`` for an error message: bounded, and safe for ints past Python's digit limit."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - e.g. ValueError: int too large to convert to str
        return f"<{type(value).__name__} too large to show>"
    return text if len(text) <= limit else text[:limit] + "..."


def format_validation_error(
    err: ValidationError, source: str = "", root: Any = None, *, path_prefix: str = "", label: str = ""
) -> str:
    """One line per problem: ``<source>: <path> (<table>): <what is wrong>, got <value>``."""
    lines = []
    for e in err.errors():
        loc = e.get("loc", ())
        path = path_prefix
        for part in loc:
            if isinstance(part, int):
                path += f"[{part}]"
            elif str(part).startswith("function-") or part in ("function-after", "function-before"):
                continue
            else:
                path += ("." if path else "") + str(part)
        table = f" ({label})" if label else ""
        if isinstance(root, dict) and len(loc) >= 2 and loc[0] == "tables" and isinstance(loc[1], int):
            try:
                t = root["tables"][loc[1]]
                table = f" (table {t.get('catalog')}.{t.get('namespace')}.{t.get('name')})"
            except (IndexError, KeyError, TypeError, AttributeError):
                table = ""
        msg = e.get("msg", "").removeprefix("Value error, ")
        got = "" if e.get("type") in ("value_error", "missing") else f", got {short_repr(e.get('input'))}"
        prefix = f"{source}: " if source else ""
        # A model-level check names its field first ("warehouse: ..."): make that part of the path.
        field_first = _FIELD_FIRST.match(msg) if len(loc) == 0 and "\t" not in msg else None
        if field_first:
            path += ("." if path else "") + field_first.group(1)
            msg = msg[field_first.end() :]
        last = path.rsplit(".", 1)[-1]
        if last and msg.startswith(f"{last}: "):  # a field validator's message names its field too
            msg = msg[len(last) + 2 :]
        if "\t" in msg:
            for line in msg.split("\n"):
                sub, _, text = line.partition("\t")
                lines.append(f"{prefix}{path}.{sub}{table}: {text}")
            continue
        lines.append(f"{prefix}{path or '<root>'}{table}: {msg}{got}")
    return "\n".join(lines)


def parse_table(data: dict[str, Any], source: str = "table") -> TableSpec:
    """A plain table (REST, CLI): ``refresh`` is rejected, it belongs to dynamic tables."""
    try:
        return TableSpec.model_validate(data, context=PLAIN_TABLE)
    except ValidationError as e:
        raise InvalidDeclaration(format_validation_error(e, source)) from None


def parse_catalog(data: dict[str, Any], source: str = "catalog") -> CatalogSpec:
    try:
        return CatalogSpec.model_validate(data, context=WRITING)
    except ValidationError as e:
        raise InvalidDeclaration(format_validation_error(e, source)) from None
