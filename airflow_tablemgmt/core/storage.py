"""One catalog's object-storage settings, rendered for each side that reads the table.

A catalog is declared with Iceberg's own (Java) property names, the ones Iceberg's documentation and
every REST catalog use: ``s3.endpoint``, ``s3.path-style-access``, ``client.region``,
``s3.access-key-id``, ``s3.secret-access-key``, ``s3.session-token``. The Spark job takes them as they
are; pyiceberg (the watcher, the gate, health) names two of them differently and has no use for Java
class names. :func:`storage_of` reads the settings that decide *where and how* the bytes are reached,
:func:`spark_properties` and :func:`pyiceberg_properties` render them, and both renders read back to
the same :class:`StorageSettings`: the two sides cannot disagree about the endpoint, the region, the
addressing style or the credentials.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
OBJECT_STORE_SCHEMES = (
    "s3://",
    "s3a://",
    "s3n://",
    "gs://",
    "abfs://",
    "abfss://",
    "wasb://",
    "wasbs://",
    "oss://",
    "cos://",
)
S3_SCHEMES = ("s3://", "s3a://", "s3n://")
# Iceberg's own FileIO for the other object stores its bundles serve (iceberg-gcp-bundle, iceberg-azure-bundle).
FILE_IO_BY_SCHEME = (
    (("gs://",), "org.apache.iceberg.gcp.gcs.GCSFileIO"),
    (("abfs://", "abfss://"), "org.apache.iceberg.azure.adlsv2.ADLSFileIO"),
)
# Properties that only the JVM understands (class names, our own switches): never handed to pyiceberg.
_JAVA_ONLY = ("io-impl", "catalog-impl", "allow-unsafe-commits")
_TRUE = frozenset({"true", "1", "yes", "on"})


@dataclass(frozen=True)
class StorageSettings:
    """What decides how a catalog's files are reached, independent of which side reads them."""

    endpoint: str | None = None
    region: str | None = None
    path_style: bool | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None


def is_object_store(location: str | None) -> bool:
    return bool(location) and str(location).strip().lower().startswith(OBJECT_STORE_SCHEMES)


def uses_s3(warehouse: str | None, properties: Mapping[str, str]) -> bool:
    values = [warehouse or "", *(str(v) for v in properties.values())]
    return any(v.strip().lower().startswith(S3_SCHEMES) for v in values)


def _flag(value: str | None) -> bool | None:
    return None if value is None else str(value).strip().lower() in _TRUE


def storage_of(properties: Mapping[str, str]) -> StorageSettings:
    """The storage settings declared in Iceberg's (Java) property names."""
    return StorageSettings(
        endpoint=properties.get("s3.endpoint"),
        region=properties.get("client.region") or properties.get("s3.region"),
        path_style=_flag(properties.get("s3.path-style-access")),
        access_key_id=properties.get("s3.access-key-id"),
        secret_access_key=properties.get("s3.secret-access-key"),
        session_token=properties.get("s3.session-token"),
    )


def storage_of_pyiceberg(properties: Mapping[str, str]) -> StorageSettings:
    """The same settings as pyiceberg reads them (its names for the region and the addressing style)."""
    virtual = _flag(properties.get("s3.force-virtual-addressing"))
    return StorageSettings(
        endpoint=properties.get("s3.endpoint"),
        region=properties.get("s3.region") or properties.get("client.region"),
        path_style=None if virtual is None else not virtual,
        access_key_id=properties.get("s3.access-key-id"),
        secret_access_key=properties.get("s3.secret-access-key"),
        session_token=properties.get("s3.session-token"),
    )


def spark_properties(warehouse: str | None, properties: Mapping[str, str]) -> dict[str, str]:
    """The catalog's properties for Iceberg's Spark catalog: as declared, plus Iceberg's FileIO for the
    object store its locations name when it names none (``S3FileIO`` for S3, ``GCSFileIO`` for ``gs://``,
    ``ADLSFileIO`` for ``abfs(s)://``; Spark's Hadoop file system has no connector for these here). On S3
    a custom endpoint means path-style addressing unless the declaration says otherwise, as pyiceberg's
    pyarrow does."""
    out = dict(properties)
    if uses_s3(warehouse, properties):
        out.setdefault("io-impl", S3_FILE_IO)
        if "s3.endpoint" in out:
            out.setdefault("s3.path-style-access", "true")
    values = [warehouse or "", *(str(v) for v in properties.values())]
    for schemes, file_io in FILE_IO_BY_SCHEME:
        if any(v.strip().lower().startswith(schemes) for v in values):
            out.setdefault("io-impl", file_io)
    return out


def pyiceberg_properties(warehouse: str | None, properties: Mapping[str, str]) -> dict[str, str]:
    """The catalog's properties for pyiceberg: Spark-only and Java-only keys left out, the region and the
    addressing style under pyiceberg's names, from the same settings the Spark side gets."""
    java = spark_properties(warehouse, properties)
    out = {k: v for k, v in java.items() if not k.startswith("spark.") and k not in _JAVA_ONLY}
    settings = storage_of(java)
    if settings.region and "s3.region" not in out:
        out["s3.region"] = settings.region
    if settings.path_style is not None:
        out.pop("s3.path-style-access", None)
        out["s3.force-virtual-addressing"] = "false" if settings.path_style else "true"
    return out


UNSAFE_COMMITS = "allow-unsafe-commits"


def check_hadoop_commits(warehouse: str | None, properties: Mapping[str, str]) -> None:
    """A ``hadoop`` catalog commits by renaming a metadata file into place, which object stores do not
    do atomically: a compaction beside a writer can make a commit silently vanish. Refused on an object
    store unless the catalog says ``allow-unsafe-commits: true``."""
    if is_object_store(warehouse) and not _flag(properties.get(UNSAFE_COMMITS)):
        raise ValueError(
            f"warehouse: a hadoop catalog on an object store ({warehouse!r}) commits by renaming files, which "
            f"is not atomic there: a concurrent commit can be lost. Use a rest, jdbc, hive or glue catalog, or "
            f"set properties.{UNSAFE_COMMITS}: 'true' if only one writer ever commits to its tables"
        )
