"""Table formats: an open name, one :class:`Format` descriptor per format, and the one registry of them.

A format (Iceberg, Delta, Hudi, or a plugin's) is declared once, as a :class:`Format` that its package
exports and names under the ``airflow_tablemgmt.formats`` entry point; the built-in formats are registered
exactly as a plugin is (this package's own entry points). Everything generic asks :data:`FORMATS`: which
actions a format has and their settings (registration, the CLI, REST), its trigger strategies and engines
(the factories), its Spark session and runtime jars (the launcher and the job), its health, views and
snapshot reader (the page, the watchers). Nothing else keeps a per-format table.

The descriptor's code lives behind ``"module:attribute"`` references, imported on first use, so declaring
the formats costs no import of pyiceberg, Spark or a factory: a Spark driver reads the descriptor without
the scheduler's side, and the scheduler without the driver's.

Loading: the first question about a format reads this package's own entry points (one distribution's
metadata) and loads the one of that name; a name they do not declare scans every installed distribution once
(a plugin). A plugin that fails to load is logged with its cause and does not take the others down.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the Spark driver reads descriptors without pydantic's models
    from airflow_tablemgmt.core.action_model import Action
    from airflow_tablemgmt.core.triggers import TriggerStrategy

log = logging.getLogger(__name__)

#: The entry-point group every format, built-in or plugin, is registered under.
ENTRY_POINT_GROUP = "airflow_tablemgmt.formats"
#: The distribution whose entry points declare the built-in formats.
DISTRIBUTION = "airflow-provider-tablemgmt"
#: A table's format when its declaration names none (the catalogs' own format).
DEFAULT_FORMAT = "iceberg"
#: The execution engines a format may declare (``Format.engines``).
ENGINES = ("spark-submit", "spark-connect")
#: The views a format may declare (``Format.views``), as the table page's tabs and the REST endpoints name them.
VIEW_TABS = ("details", "files", "snapshots")

#: The job spec's catalog property naming the table's format (absent: :data:`DEFAULT_FORMAT`); the job
#: builds its session for that format alone (``spark/conf.py``).
TABLE_FORMAT_PROPERTY = "tablemgmt.table-format"
#: The job spec's catalog property naming a format's driver-side module (``FormatSession.module``); the
#: Spark job imports it when it meets the format.
FORMAT_MODULE_PROPERTY = "tablemgmt.format-module"
#: The option through which a path-based format's factory tells its maintainer where the table is
#: (``<warehouse>/<namespace>/<name>``); the maintainer takes it out before validating the options, and
#: declarations cannot set it (the settings models forbid unknown keys).
TABLE_LOCATION_OPTION = "table-location"


@dataclass(frozen=True)
class FormatSession:
    """What a job on a table of one format needs of Spark: its SQL extensions, the session catalog's
    implementation, further settings (a serializer), and its runtime jars (the artifact resolver's
    needs, ``tablemgmt jars fetch --format <format>``).

    ``catalog_impl``: a catalog-based format (Paimon) names its Spark catalog class; the job's catalog
    is configured as ``spark.sql.catalog.<catalog name>`` of that class, with the catalog's warehouse.
    ``module``: the format's driver-side module, whose ``MAINTAINERS`` (action -> maintainer) the Spark
    job runs (``spark/job/plugins.py``)."""

    extensions: str
    session_catalog: str | None
    needs: tuple[str, ...]
    conf: dict[str, str] = field(default_factory=dict)
    catalog_impl: str | None = None
    module: str | None = None
    #: Maven coordinates of the format's runtime (``group:artifact:version``), fetched as the need named
    #: after the format (``tablemgmt jars fetch --format <format>``); empty: the need exists already
    #: (Iceberg's runtime, which every catalog needs).
    jars: tuple[str, ...] = ()
    #: The runtime belongs on the driver's own class path too (``spark.driver.extraClassPath``), not only
    #: added by ``--jars`` (a bundle that shades classes Spark's own loader also holds: Hudi's).
    driver_class_path: bool = False
    #: The job's catalog is the catalog itself, configured from its type (REST, JDBC, Glue, …): the catalogs'
    #: own format. Otherwise the format's session catalog or catalog class, or none, and the maintainers
    #: read their own tables.
    uses_catalog: bool = False


class UnknownFormat(ValueError):
    """A format name no installed package declares."""


@dataclass(frozen=True)
class Format:
    """One table format: what it maintains and where its code is.

    ``actions``: its maintenance actions (settings models included), each with its trigger strategy in
    ``strategies``; ``hosts``: work of another kind that runs on its tables (a dynamic table's ``refresh``);
    ``engines``: the execution engines its jobs are proven on; ``session``: what its jobs need of Spark
    (extensions, catalog, jars, the driver-side module with its ``MAINTAINERS``); ``path_based``: its
    tables live at ``<warehouse>/<namespace>/<name>`` rather than in the catalog.

    References (``"module:attribute"``, imported on first use): ``factory`` (a ``ProcessFactory`` class),
    ``health`` (``(catalog, table) -> FormatHealth``), ``views`` (tab -> ``(catalog, table) -> dict``),
    ``reader`` (the watchers' snapshot reader: ``(catalog) -> reader``)."""

    name: str
    actions: tuple[Action, ...]
    strategies: Mapping[str, TriggerStrategy]
    session: FormatSession
    factory: str
    engines: tuple[str, ...] = ("spark-submit",)
    hosts: tuple[str, ...] = ()
    path_based: bool = False
    health: str | None = None
    views: Mapping[str, str] = field(default_factory=dict)
    reader: str | None = None
    #: ``(table, catalog) -> [(mark, commit id, committed at ms)]``, the table's newest commits newest first:
    #: which process attempt made each (recovery on another host reads it, ``lifecycle/table_marks.py``).
    marks: str | None = None
    description: str = ""
    #: How a table of this format is recognised at its location (without a JVM): the directories its root
    #: holds (all of them), a pattern one file of the first must match (None: any), and the same in words.
    root: tuple[str, ...] = ()
    root_files: str | None = None
    marker: str = ""
    title: str = ""

    @property
    def display(self) -> str:
        """The format's name as prose writes it (``title``, else the name)."""
        return self.title or self.name

    def __post_init__(self) -> None:
        names = {a.name for a in self.actions}
        if names != set(self.strategies):
            raise ValueError(
                f"format {self.name!r}: the actions {sorted(names)} and the trigger strategies' actions "
                f"{sorted(self.strategies)} differ"
            )
        unknown = [e for e in self.engines if e not in ENGINES]
        if unknown:
            raise ValueError(
                f"format {self.name!r}: unknown execution engine(s) {unknown}; known: {', '.join(ENGINES)}"
            )
        views = sorted(set(self.views) - set(VIEW_TABS))
        if views:
            raise ValueError(f"format {self.name!r}: unknown view(s) {views}; known: {', '.join(VIEW_TABS)}")
        if not self.session.module:
            raise ValueError(f"format {self.name!r}: the session names no driver-side module")

    @property
    def action_names(self) -> set[str]:
        return {a.name for a in self.actions}

    def supports(self, action: str) -> bool:
        return action in self.action_names or action in self.hosts

    def action(self, name: str) -> Action | None:
        return next((a for a in self.actions if a.name == name), None)

    def load(self, reference: str | None) -> Any:
        """The object a ``"module:attribute"`` reference of this descriptor names (None for None)."""
        return None if reference is None else load_reference(reference)

    def rows(self) -> list[dict[str, Any]]:
        """One row per action: format, action, trigger, engines (docs/formats.md's table)."""
        return [
            {
                "format": self.name,
                "action": action,
                "interval": str(strategy.interval),
                "on_new_snapshot": strategy.on_new_snapshot,
                "parallelism": strategy.parallelism,
                "engines": list(self.engines),
            }
            for action, strategy in sorted(self.strategies.items())
        ]


def load_reference(reference: str) -> Any:
    """Import ``"package.module:attribute"`` and return the attribute."""
    module, _, attribute = reference.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attribute.split(".") if attribute else ():
        obj = getattr(obj, part)
    return obj


class FormatRegistry:
    """Name -> :class:`Format`, filled from the entry points on first use (thread-safe)."""

    def __init__(self, group: str = ENTRY_POINT_GROUP, distribution: str = DISTRIBUTION) -> None:
        self.group = group
        self.distribution = distribution
        self.errors: dict[str, str] = {}
        self._formats: dict[str, Format] = {}
        self._own_eps: list[Any] | None = None
        self._own_tried: set[str] = set()  # own entry points loaded (or failed) so far
        self._own_loaded = False
        self._all_loaded = False
        self._lock = threading.RLock()

    def declare(self, fmt: Format) -> Format:
        """Register ``fmt`` (a test's format, or one loaded from an entry point)."""
        with self._lock:
            existing = self._formats.get(fmt.name)
            if existing is not None and existing != fmt:
                raise ValueError(f"format {fmt.name!r} is already declared differently")
            self._formats[fmt.name] = fmt
        return fmt

    def forget(self, name: str) -> None:
        """Drop a format declared by :meth:`declare` (tests)."""
        with self._lock:
            self._formats.pop(name, None)

    def find(self, name: object) -> Format | None:
        """The format named ``name``, loading the plugins on a miss, or None. One of this package's formats
        is loaded alone (a table's task start validates and builds with its own format only)."""
        text = str(name)
        if text not in self._formats:
            self._load_own(text)
        if text not in self._formats:
            self.load_all()
        return self._formats.get(text)

    def get(self, name: object) -> Format:
        """The format named ``name``; :class:`UnknownFormat` naming the known ones."""
        found = self.find(name)
        if found is None:
            raise UnknownFormat(
                f"{str(name)!r} is not a known table format; known: {', '.join(self.known())} "
                "(a format plugin adds its own: docs/writing-a-format-plugin.md)"
            )
        return found

    def known(self) -> list[str]:
        """Every installed format's name, sorted (plugins included)."""
        self.load_all()
        return sorted(self._formats)

    def builtin(self) -> list[Format]:
        """This package's own formats (what its JSON schema and help document), in entry-point order."""
        self._load_own()
        return [self._formats[ep.name] for ep in self._own_points() if ep.name in self._formats]

    def builtin_format(self, name: object) -> Format | None:
        """This package's own format named ``name``, loading only that one; None for a plugin's or an unknown
        name (nothing else is loaded or scanned)."""
        text = str(name)
        if text not in {ep.name for ep in self._own_points()}:
            return None
        self._load_own(text)
        return self._formats.get(text)

    def loaded(self) -> list[Format]:
        """The formats known so far, without loading more."""
        return list(self._formats.values())

    def all(self) -> list[Format]:
        self.load_all()
        return list(self._formats.values())

    def supported(self, name: str) -> set[str]:
        found = self.find(name)
        return set() if found is None else found.action_names | set(found.hosts)

    def unsupported_action(self, table_id: str, name: str, action: str) -> str | None:
        """Why ``table_id`` (of format ``name``) cannot have ``action``, or None when its format supports it."""
        found = self.find(name)
        if found is None or found.supports(action):
            return None  # an unknown format is refused where it is validated
        return (
            f"table {table_id}: action {action!r} is not supported by its format {name!r}; "
            f"the {name} format supports: {', '.join(sorted(found.action_names | set(found.hosts)))}"
        )

    def _own_points(self) -> list[Any]:
        """This package's own entry points (one distribution's metadata, read once), in their order."""
        if self._own_eps is None:
            with self._lock:
                if self._own_eps is None:
                    from importlib.metadata import PackageNotFoundError, distribution

                    try:
                        dist = distribution(self.distribution)
                        self._own_eps = [ep for ep in dist.entry_points if ep.group == self.group]
                    except PackageNotFoundError:  # not installed (a source checkout): every distribution's
                        self._own_eps = list(_entry_points(self.group))
        return self._own_eps

    def _load_own(self, only: str | None = None) -> None:
        """Load this package's own formats (``only``: just the one of that name, if it is one of them)."""
        if self._own_loaded:
            return
        with self._lock:
            if self._own_loaded:
                return
            for ep in self._own_points():
                if (only is None or ep.name == only) and ep.name not in self._own_tried:
                    self._own_tried.add(ep.name)
                    self._load_point(ep)
            if only is None:
                self._own_loaded = True

    def load_all(self) -> bool:
        """Load every installed format once; True on the call that loaded."""
        self._load_own()
        if self._all_loaded:
            return False
        with self._lock:
            if self._all_loaded:
                return False
            for ep in _entry_points(self.group):
                if ep.name not in self._formats:
                    self._load_point(ep)
            self._all_loaded = True
        return True

    def _load_point(self, ep: Any) -> bool:
        try:
            obj = ep.load()
            if not isinstance(obj, Format):
                raise TypeError(f"{ep.value} is a {type(obj).__name__}, not a Format")
            if obj.name != ep.name:
                raise ValueError(f"{ep.value} declares format {obj.name!r} under the entry point {ep.name!r}")
            self.declare(obj)
            return True
        except Exception as e:  # noqa: BLE001 - a broken plugin must not take the others down
            self.errors[ep.name] = f"{type(e).__name__}: {e}"
            log.error("format %r (%s) failed to load: %s", ep.name, ep.value, e)
            return False


def _entry_points(group: str) -> Iterable[Any]:
    from importlib.metadata import entry_points

    return entry_points(group=group)


FORMATS = FormatRegistry()


def known_format(value: object) -> str:
    """``value`` as an installed table format's name; :class:`UnknownFormat` (a ``ValueError``) otherwise."""
    text = str(value).strip().lower()
    return FORMATS.get(text).name


def table_format_of(properties: Mapping[str, Any]) -> str:
    """The format a job spec's catalog properties name (:data:`TABLE_FORMAT_PROPERTY`), else the default."""
    return str(properties.get(TABLE_FORMAT_PROPERTY) or DEFAULT_FORMAT)


__all__ = [
    "DEFAULT_FORMAT",
    "ENGINES",
    "ENTRY_POINT_GROUP",
    "FORMATS",
    "FORMAT_MODULE_PROPERTY",
    "Format",
    "FormatRegistry",
    "FormatSession",
    "TABLE_FORMAT_PROPERTY",
    "TABLE_LOCATION_OPTION",
    "UnknownFormat",
    "VIEW_TABS",
    "known_format",
    "load_reference",
    "table_format_of",
]
