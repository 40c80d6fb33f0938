"""A path-based table's directory (Delta's ``_delta_log``, Hudi's ``.hoodie``), local or on S3, read without a
JVM: a local one with ``os`` (and pyarrow for Parquet), one on S3 through pyarrow's ``S3FileSystem``.

A table on S3 (``s3a://``, ``s3://``, ``s3n://``) is reached with the settings its Spark job uses, the
catalog's ``spark.hadoop.fs.s3a.*`` properties (Hadoop's S3A names, so the two sides cannot disagree):
``endpoint`` (with ``http://`` or ``https://``, else ``connection.ssl.enabled`` decides), ``access.key``,
``secret.key``, ``session.token``, ``path.style.access``, ``endpoint.region`` (or ``region``), and the
per-bucket forms ``fs.s3a.bucket.<bucket>.<name>``, which win as they do in S3A. Without keys, pyarrow's
default AWS chain (environment, ``~/.aws``, instance metadata) is used, as S3A's default provider does.

Secrets never leave this module: :class:`S3Access` does not print them, and every error is raised as
:class:`StoreUnreachable` or :class:`PathNotFound` naming the location and the endpoint, its text scrubbed
of the access key, the secret and the token.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_tablemgmt.core.secrets import parse_reference
from airflow_tablemgmt.metadata.errors import HealthUnavailable, PathNotFound, StoreUnreachable
from airflow_tablemgmt.metadata.table_paths import local_path

S3A_PREFIX = "spark.hadoop.fs.s3a."
S3_SCHEMES = ("s3a://", "s3://", "s3n://")
_TRUE = frozenset({"true", "1", "yes", "on"})
#: How long one request may take before the read fails (seconds): a watcher polls again, a health read
#: answers; S3A's defaults wait minutes, which no page or trigger should.
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 30.0
MAX_ATTEMPTS = 2


@dataclass(frozen=True)
class S3Access:
    """How a bucket is reached, from the catalog's ``spark.hadoop.fs.s3a.*`` properties."""

    endpoint: str | None = None  # host[:port], no scheme
    scheme: str = "https"
    region: str | None = None
    path_style: bool | None = None
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.access_key, self.secret_key, self.session_token) if s)

    def where(self) -> str:
        return f"{self.scheme}://{self.endpoint}" if self.endpoint else "AWS S3"


def s3a_access(properties: Mapping[str, str], bucket: str | None = None) -> S3Access:
    """The S3A settings of ``properties`` (the catalog's), the bucket's own settings first."""

    def get(name: str) -> str | None:
        for key in ([f"{S3A_PREFIX}bucket.{bucket}.{name}"] if bucket else []) + [f"{S3A_PREFIX}{name}"]:
            value = properties.get(key)
            if value is not None and str(value).strip() != "":
                if parse_reference(value) is not None:  # a caller that forgot to resolve: never send it
                    raise HealthUnavailable(
                        f"properties.{key}: {str(value).strip()!r} is a secret reference that was not "
                        "resolved here (conn:/var:/env: are resolved where Airflow is at hand)"
                    )
                return str(value).strip()
        return None

    endpoint = get("endpoint")
    ssl = get("connection.ssl.enabled")
    scheme = "https" if ssl is None or ssl.lower() in _TRUE else "http"
    if endpoint is not None:
        for prefix in ("http://", "https://"):
            if endpoint.lower().startswith(prefix):
                scheme, endpoint = prefix[:-3], endpoint[len(prefix) :]
        endpoint = endpoint.rstrip("/")
    path_style = get("path.style.access")
    return S3Access(
        endpoint=endpoint,
        scheme=scheme,
        region=get("endpoint.region") or get("region"),
        path_style=None if path_style is None else path_style.lower() in _TRUE,
        access_key=get("access.key"),
        secret_key=get("secret.key"),
        session_token=get("session.token"),
    )


@functools.lru_cache(maxsize=32)
def _s3_filesystem(access: S3Access) -> Any:
    import pyarrow.fs as pafs

    return pafs.S3FileSystem(
        access_key=access.access_key,
        secret_key=access.secret_key,
        session_token=access.session_token,
        region=access.region,
        scheme=access.scheme,
        endpoint_override=access.endpoint,
        # pyarrow addresses by path whenever an endpoint is given; S3A's explicit "false" means virtual hosts
        force_virtual_addressing=access.path_style is False and access.endpoint is not None,
        connect_timeout=CONNECT_TIMEOUT_S,
        request_timeout=REQUEST_TIMEOUT_S,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=MAX_ATTEMPTS),
    )


@dataclass(frozen=True)
class Entry:
    name: str
    size: int
    is_dir: bool


class TableDir:
    """The table's root: listings and reads relative to it, errors naming ``location`` (never a secret)."""

    def __init__(self, location: str, filesystem: Any, root: str, access: S3Access | None = None) -> None:
        self.location = location.rstrip("/")
        self._filesystem = filesystem
        self.root = root.rstrip("/") or "/"
        self.access = access

    def __repr__(self) -> str:
        return f"TableDir({self.location!r})"

    @property
    def filesystem(self) -> Any:
        """The pyarrow file system the table is on (paths under :attr:`root`)."""
        return self._filesystem

    def _path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def list(self, rel: str) -> list[Entry]:
        """The files and directories directly under ``rel``. Raises PathNotFound / StoreUnreachable."""
        import pyarrow.fs as pafs

        try:
            infos = self.filesystem.get_file_info(pafs.FileSelector(self._path(rel), allow_not_found=False))
        except Exception as e:  # noqa: BLE001 - pyarrow raises OSError subclasses and ArrowException
            raise self._error(rel, e) from None
        return [
            Entry(i.base_name, int(i.size or 0), i.type == pafs.FileType.Directory)
            for i in infos
            if i.type in (pafs.FileType.File, pafs.FileType.Directory)
        ]

    def walk(self, skip: str) -> Iterator[str]:
        """The names of every file below the root, not descending into directories named ``skip``."""
        import pyarrow.fs as pafs

        for top in self.list(""):
            if not top.is_dir:
                yield top.name
            elif top.name != skip:
                try:
                    infos = self.filesystem.get_file_info(
                        pafs.FileSelector(self._path(top.name), recursive=True, allow_not_found=True)
                    )
                except Exception as e:  # noqa: BLE001
                    raise self._error(top.name, e) from None
                for info in infos:
                    if info.type == pafs.FileType.File and f"/{skip}/" not in info.path:
                        yield info.base_name

    def read_bytes(self, rel: str) -> bytes:
        try:
            with self.filesystem.open_input_stream(self._path(rel)) as f:
                return f.read()
        except Exception as e:  # noqa: BLE001
            raise self._error(rel, e) from None

    def read_text(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8")

    def read_parquet(self, rel: str) -> Any:
        import pyarrow.parquet as pq

        try:
            return pq.read_table(self._path(rel), filesystem=self.filesystem)
        except Exception as e:  # noqa: BLE001
            raise self._error(rel, e) from None

    def scrub(self, text: str) -> str:
        for secret in self.access.secrets() if self.access is not None else ():
            text = text.replace(secret, "***")
        return text

    def _error(self, rel: str, e: BaseException) -> HealthUnavailable:
        where = f"{self.location}/{rel}" if rel else self.location
        reason = self.scrub(" ".join(str(e).split()))[:300]
        if isinstance(e, (FileNotFoundError, NotADirectoryError)):
            return PathNotFound(f"{where}: not found")
        if self.access is None:
            return StoreUnreachable(f"{where}: unreadable ({reason})")
        return StoreUnreachable(
            f"{where}: the object store at {self.access.where()} could not be read ({type(e).__name__}: "
            f"{reason}); check the catalog's spark.hadoop.fs.s3a.* endpoint and credentials"
        )


class LocalTableDir(TableDir):
    """A table on local disk, read with ``os`` (no pyarrow import on a watcher's cheap poll)."""

    def __init__(self, location: str, root: str) -> None:
        super().__init__(location, None, root)

    @property
    def filesystem(self) -> Any:
        if self._filesystem is None:
            import pyarrow.fs as pafs

            self._filesystem = pafs.LocalFileSystem()
        return self._filesystem

    def list(self, rel: str) -> list[Entry]:
        try:
            with os.scandir(self._path(rel)) as entries:
                return [Entry(e.name, 0 if e.is_dir() else e.stat().st_size, e.is_dir()) for e in entries]
        except OSError as e:
            raise self._error(rel, e) from None

    def walk(self, skip: str) -> Iterator[str]:
        for _dirpath, dirs, names in os.walk(self.root):
            dirs[:] = [d for d in dirs if d != skip]
            yield from names

    def read_bytes(self, rel: str) -> bytes:
        try:
            with open(self._path(rel), "rb") as f:
                return f.read()
        except OSError as e:
            raise self._error(rel, e) from None

    def read_parquet(self, rel: str) -> Any:
        import pyarrow.parquet as pq

        try:
            return pq.read_table(self._path(rel))
        except Exception as e:  # noqa: BLE001
            raise self._error(rel, e) from None


def open_table_dir(
    location: str, properties: Mapping[str, str] | None = None, kind: str = "table"
) -> TableDir:
    """``location`` (a local path, ``file:`` URI or ``s3a://``/``s3://`` URI) as a :class:`TableDir`; an S3
    location needs ``properties`` (the catalog's, secret references resolved). ``kind`` names the format
    in the error of a location that cannot be read here."""
    root = local_path(location)
    if root is not None:
        return LocalTableDir(location, root)
    lowered = location.lower()
    if lowered.startswith(S3_SCHEMES) and properties is not None:
        bucket_and_key = location.split("://", 1)[1].strip("/")
        bucket = bucket_and_key.split("/", 1)[0]
        access = s3a_access(properties, bucket)
        try:
            filesystem = _s3_filesystem(access)
        except Exception as e:  # noqa: BLE001 - an invalid setting (e.g. a region pyarrow refuses)
            reason = " ".join(str(e).split())
            for secret in access.secrets():
                reason = reason.replace(secret, "***")
            raise StoreUnreachable(
                f"{location}: pyarrow's S3 client refused the catalog's spark.hadoop.fs.s3a.* settings "
                f"({reason})"
            ) from None
        return TableDir(location, filesystem, bucket_and_key, access)
    if lowered.startswith(S3_SCHEMES):
        raise HealthUnavailable(
            f"{location}: an S3 {kind} is read without a JVM with its catalog's spark.hadoop.fs.s3a.* "
            "properties, and none were given; the job reads the table itself"
        )
    raise HealthUnavailable(
        f"{location}: only local and S3 (s3a://, s3://) {kind}s are read without a JVM; the job reads the "
        "table itself"
    )


def readable_catalog(context: Any) -> Any:
    """The catalog a factory reads its table with (a ``TriggerContext``'s): its secret references resolved
    (``context.resolve_catalog``) when its warehouse is on an object store, as stored otherwise."""
    from airflow_tablemgmt.core.storage import is_object_store

    catalog = context.catalog
    if context.resolve_catalog is not None and is_object_store(catalog.warehouse):
        return context.resolve_catalog(catalog)
    return catalog
