"""Spark configuration, shared by the launcher and the job: the Iceberg catalog, the session defaults,
the job's catalog as validated from its spec, its application name, and where Spark is installed."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from airflow_tablemgmt.core.factory import FormatSession, JobSpec
from airflow_tablemgmt.core.formats import FORMATS, TABLE_FORMAT_PROPERTY, table_format_of
from airflow_tablemgmt.core.secrets import is_sensitive
from airflow_tablemgmt.core.storage import spark_properties
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.spark.errors import InvalidJobSpec

SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"

KRYO = "org.apache.spark.serializer.KryoSerializer"


def table_format(catalog: CatalogSpec) -> str:
    """The format a job spec's catalog was rendered for (the default unless a factory said otherwise),
    which must be an installed format: the job builds that format's session and runs its maintainers, and
    nothing else a job spec names is imported."""
    fmt = table_format_of(catalog.properties)
    if FORMATS.find(fmt) is None:
        raise InvalidJobSpec(
            f"catalog.properties.{TABLE_FORMAT_PROPERTY}: unknown format {fmt!r}; installed: "
            f"{', '.join(FORMATS.known())} (install the format's package where the Spark driver runs)"
        )
    return fmt


def format_session(catalog: CatalogSpec) -> FormatSession:
    """What a job on a table of ``catalog`` needs of Spark (its format's session)."""
    return FORMATS.get(table_format(catalog)).session


def owns_catalog(session: FormatSession) -> bool:
    """Whether a format's jobs use the catalog itself (the catalogs' own format, ``uses_catalog``) rather
    than a session catalog (a path-based format), a catalog class over the warehouse (a catalog-based one)
    or none."""
    return session.uses_catalog


def session_conf(catalog: CatalogSpec) -> dict[str, str]:
    """Every setting the job's session builder gets for a table of ``catalog``: its format's extensions and
    settings, and its catalog. A format with neither a session catalog nor a catalog class of its own is
    the catalogs' own format (``uses_catalog``): the job's catalog is configured from the catalog (:func:`catalog_conf`). A
    path-based format (its session catalog) and a catalog-based one (its catalog class over the catalog's
    warehouse) get the catalog's own ``spark.*`` properties (``spark.hadoop.fs.s3a.*`` for a warehouse on
    S3) instead."""
    profile = format_session(catalog)
    if owns_catalog(profile):
        return {"spark.sql.extensions": profile.extensions, **profile.conf, **catalog_conf(catalog)}
    conf = {"spark.sql.extensions": profile.extensions, **profile.conf}
    if profile.session_catalog:
        conf["spark.sql.catalog.spark_catalog"] = profile.session_catalog
    if profile.catalog_impl:  # a catalog-based format: the job's catalog is the format's own
        conf[f"spark.sql.catalog.{catalog.name}"] = profile.catalog_impl
        if catalog.warehouse:
            conf[f"spark.sql.catalog.{catalog.name}.warehouse"] = catalog.warehouse
    for key, value in catalog.properties.items():
        if key.startswith("spark."):
            conf[key] = str(value)
    return conf


# Catalogs without a short Iceberg ``type`` are named by implementation class.
_CATALOG_IMPL = {
    CatalogType.GLUE: "org.apache.iceberg.aws.glue.GlueCatalog",
    CatalogType.JDBC: "org.apache.iceberg.jdbc.JdbcCatalog",
}
_CATALOG_TYPE = {CatalogType.HADOOP: "hadoop", CatalogType.REST: "rest", CatalogType.HIVE: "hive"}


def catalog_conf(catalog: CatalogSpec) -> dict[str, str]:
    """``spark.sql.catalog.<name>*`` entries for an Iceberg ``SparkCatalog``.

    ``properties`` are Iceberg catalog properties (``uri``, ``io-impl``, ``jdbc.user`` ...) and land
    under the catalog prefix; a key that already starts with ``spark.`` (e.g.
    ``spark.hadoop.fs.s3a.endpoint``) is passed through as a Spark setting unchanged.
    The table cache is off by default: a maintenance job must measure the table as committed,
    not as it was when first loaded.
    """
    prefix = f"spark.sql.catalog.{catalog.name}"
    conf: dict[str, str] = {prefix: SPARK_CATALOG, f"{prefix}.cache-enabled": "false"}
    if catalog.type in _CATALOG_IMPL:
        conf[f"{prefix}.catalog-impl"] = _CATALOG_IMPL[catalog.type]
        if catalog.type == CatalogType.GLUE:
            conf[f"{prefix}.io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
    else:
        conf[f"{prefix}.type"] = _CATALOG_TYPE[catalog.type]
    if catalog.warehouse:
        conf[f"{prefix}.warehouse"] = catalog.warehouse
    # Iceberg's S3FileIO for a catalog on S3 that names no FileIO (core/storage.py renders both sides).
    for key, value in spark_properties(catalog.warehouse, catalog.properties).items():
        conf[key if key.startswith("spark.") else f"{prefix}.{key}"] = str(value)
    return conf


# Settings the job applies to its SparkSession builder take effect there, because the session (and its
# catalogs and Hadoop configuration) is created inside the job (spark/job/main.py). Other ``spark.*`` settings
# (spark.driver.*, spark.jars.packages, ...) are read when spark-submit launches the JVM.
_SESSION_PREFIXES = ("spark.sql.", "spark.hadoop.")


def launch_conf(catalog: CatalogSpec) -> dict[str, str]:
    """The part of :func:`catalog_conf` that must be on the spark-submit command line.

    Only non-secret ``spark.*`` launch settings: everything else (the catalog's wiring, its
    credentials, ``header.*``, ``spark.hadoop.*``) travels in the job's 0600 spec file and is applied
    by the job before the session starts, so ``ps`` and the logged command line never show it.
    A sensitive launch setting is not put on the command line either; it is applied on the session
    builder, where Spark may ignore it (set it in the ``spark_default`` connection instead).
    """
    rendered = catalog_conf(catalog) if owns_catalog(format_session(catalog)) else session_conf(catalog)
    return {k: v for k, v in rendered.items() if not k.startswith(_SESSION_PREFIXES) and not is_sensitive(k)}


def base_conf(local: bool = True) -> dict[str, str]:
    """Session settings every job gets. ``local`` keeps shuffles small for ``local[*]`` masters."""
    conf = {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        # A short batch job: no web UI and no console progress bars (they would fill the task log).
        # The event log stays Spark's default (off) unless spark-defaults.conf asks for it.
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Cutoffs are computed in UTC; literals carry an explicit offset, this keeps output in UTC too.
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": "1g",
    }
    if local:
        conf["spark.sql.shuffle.partitions"] = "4"
        conf["spark.default.parallelism"] = "4"
    return conf


def spark_home() -> str:
    """The installed pyspark package directory, which is a complete SPARK_HOME (bin/, jars/)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("pyspark is not installed: pip install 'pyspark>=3.5,<3.6'")
    return str(Path(spec.origin).resolve().parent)


def catalog_settings(pairs: Iterable[tuple[str, str]], catalog: str) -> dict[str, str]:
    """The Spark settings of catalog ``catalog`` among ``pairs``: ``spark.sql.catalog.<name>[.*]``."""
    key = f"spark.sql.catalog.{catalog}"
    return {k: v for k, v in pairs if k == key or k.startswith(f"{key}.")}


def io_settings(settings: dict[str, str], catalog: str) -> dict[str, str]:
    """:func:`catalog_settings` as Iceberg catalog properties (prefix off), minus Spark's own settings."""
    prefix = f"spark.sql.catalog.{catalog}."
    return {
        key[len(prefix) :]: value
        for key, value in settings.items()
        if key.startswith(prefix) and not key[len(prefix) :].startswith("spark.")
    }


_STAND_IN = "env:TMS_RESOLVED_SECRET"  # any well-formed reference: only the shape is being checked


def validated_catalog(catalog: dict[str, Any], field: str = "catalog") -> CatalogSpec:
    """``catalog`` (JSON, its references possibly already resolved) as a validated ``CatalogSpec``.

    A resolved secret is plaintext, which ``CatalogSpec`` rightly refuses for a sensitive key: the
    shape is validated with those values standing in as a reference, then the real values are put back
    without re-validation.
    """
    if not isinstance(catalog, dict):
        raise InvalidJobSpec(f"{field}: expected an object, got {type(catalog).__name__}")
    properties = catalog.get("properties") or {}
    if not isinstance(properties, dict):
        raise InvalidJobSpec(f"{field}.properties: expected an object, got {type(properties).__name__}")
    stand_in = {k: (_STAND_IN if is_sensitive(str(k)) else v) for k, v in properties.items()}
    try:
        spec = CatalogSpec.model_validate({**catalog, "properties": stand_in})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise InvalidJobSpec(f"{field}{'.' + where if where else ''}: {first.get('msg', e)}") from None
    return spec.model_copy(update={"properties": {str(k): str(v) for k, v in properties.items()}})


def app_name(job: JobSpec) -> str:
    t = job.table
    suffix = f"-p{job.process_id}a{job.attempt}" if job.process_id is not None else ""
    return f"tms-{job.action}-{t.get('catalog')}.{t.get('namespace')}.{t.get('name')}{suffix}"
