"""Every Spark artifact a job can need, at pinned versions, resolved once per host into a cache directory.
(Just over 400 lines: the pins, the resolver and its verified download kept together; the next split is
``catalog_needs``, which half a dozen callers import from here.)

A *need* (``iceberg``, ``aws``, ``hudi`` …) maps to Maven coordinates. :func:`resolve` turns needs into
local jar paths for ``spark-submit --jars``: the Iceberg runtime from the ``snowpark-connect-deps-iceberg``
wheel when it is installed (the PyPI-only path), else a verified file in the cache directory, else a
download from the Maven repository whose checksum (``.sha512``, ``.sha256`` or ``.sha1``, the strongest the
repository has) must match before the file is renamed into place. Spark's own resolver (Ivy,
``--packages``) never runs for these, so a task does not resolve dependency graphs over the network; with
``offline`` set (``[tablemgmt] jars_offline``), a missing artifact is an error that names its coordinate
and the ``tablemgmt jars fetch`` command that fetches it.

The pins carry their dependencies explicitly (each runtime below is a shaded bundle, or lists the jars it
needs beyond Spark's own), so resolution is a download of named files, never a graph walk.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.spark.errors import ArtifactError

log = logging.getLogger(__name__)

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
SPARK_SCALA = "3.5_2.12"
ICEBERG_VERSION = "1.10.2"
# The wheel that carries Iceberg's Spark runtime (the zero-Maven path). 1.0.2 exactly: 1.0.3's jar lacks
# its shaded classes.
WHEEL_PACKAGE = "snowpark_connect_deps_iceberg"
_CHECKSUMS = ("sha512", "sha256", "sha1")
_TIMEOUT_S = 60
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Artifact:
    """One Maven artifact (a jar) at a pinned version."""

    group: str
    name: str
    version: str

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.name}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.name}-{self.version}.jar"

    @property
    def repository_path(self) -> str:
        """The jar's path in a Maven repository (and in the cache directory, which has the same layout)."""
        return f"{self.group.replace('.', '/')}/{self.name}/{self.version}/{self.file_name}"


@dataclass(frozen=True)
class Need:
    """What a job may need, and the artifacts that provide it."""

    name: str
    description: str
    artifacts: tuple[Artifact, ...]


def _a(coordinate: str) -> Artifact:
    group, name, version = coordinate.split(":")
    return Artifact(group, name, version)


ICEBERG_RUNTIME = _a(f"org.apache.iceberg:iceberg-spark-runtime-{SPARK_SCALA}:{ICEBERG_VERSION}")
#: What a job may need besides a format's runtime (a format's is its descriptor's: :func:`all_needs`).
BASE_NEEDS: dict[str, Need] = {
    n.name: n
    for n in (
        Need(
            "iceberg", "Iceberg's Spark runtime (catalogs, procedures, S3FileIO's code)", (ICEBERG_RUNTIME,)
        ),
        # The AWS SDK v2 for Iceberg's S3FileIO, Glue and the REST catalog's SigV4. 1.10.2 was not published.
        Need(
            "aws",
            "Iceberg's AWS bundle: S3FileIO, Glue, SigV4",
            (_a("org.apache.iceberg:iceberg-aws-bundle:1.10.1"),),
        ),
        Need("gcp", "Iceberg's GCP bundle: GCSFileIO", (_a("org.apache.iceberg:iceberg-gcp-bundle:1.10.0"),)),
        Need(
            "azure",
            "Iceberg's Azure bundle: ADLSFileIO",
            (_a("org.apache.iceberg:iceberg-azure-bundle:1.10.0"),),
        ),
        # Hadoop's s3a:// filesystem at the version of pyspark 3.5's Hadoop client (3.3.4), and the AWS SDK v1
        # bundle it was built against (≈ 280 MB: fetched only when a catalog reads s3a:// through Hadoop).
        Need(
            "hadoop-aws",
            "Hadoop's s3a:// filesystem (hadoop catalogs and Hadoop-based file listings on S3)",
            (_a("org.apache.hadoop:hadoop-aws:3.3.4"), _a("com.amazonaws:aws-java-sdk-bundle:1.12.262")),
        ),
        Need(
            "postgresql",
            "PostgreSQL's JDBC driver (JDBC catalogs on PostgreSQL)",
            (_a("org.postgresql:postgresql:42.7.8"),),
        ),
        Need(
            "spark-connect",
            "the Spark Connect server for Spark 3.5",
            (_a("org.apache.spark:spark-connect_2.12:3.5.7"),),
        ),
        # Iceberg's reference REST catalog server (RESTCatalogServer, ≈ 210 MB, a runnable jar): not a job's
        # need; the tests and a local REST catalog start it. 1.10.2's runtime jar was not published.
        Need(
            "iceberg-rest-fixture",
            "Iceberg's reference REST catalog server (tests, local REST catalogs)",
            (_a("org.apache.iceberg:iceberg-open-api:1.10.1"),),
        ),
    )
}


def format_needs() -> dict[str, tuple[str, ...]]:
    """What ``tablemgmt jars fetch --format F`` fetches, per installed format: its session's needs."""
    from airflow_tablemgmt.core.formats import FORMATS

    return {f.name: tuple(f.session.needs) for f in FORMATS.all()}


def all_needs() -> dict[str, Need]:
    """Every need: :data:`BASE_NEEDS` and each installed format's runtime (its session's ``jars``, under the
    format's name)."""
    from airflow_tablemgmt.core.formats import FORMATS

    out = dict(BASE_NEEDS)
    for f in FORMATS.all():
        if f.session.jars and f.name not in out:
            out[f.name] = Need(
                f.name, f"{f.description or f.name}: its Spark runtime", tuple(_a(c) for c in f.session.jars)
            )
    return out


def default_jars_dir() -> Path:
    """``$XDG_CACHE_HOME/airflow-tablemgmt/jars``, else ``~/.cache/airflow-tablemgmt/jars``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "airflow-tablemgmt" / "jars"


@dataclass(frozen=True)
class ArtifactSettings:
    """``[tablemgmt] jars_dir``, ``maven_repository`` and ``jars_offline``."""

    directory: Path = field(default_factory=default_jars_dir)
    repository: str = MAVEN_CENTRAL
    offline: bool = False


@dataclass(frozen=True)
class Resolved:
    """Where an artifact was found: ``wheel``, ``cache`` or ``downloaded`` (with its size and time)."""

    need: str
    artifact: Artifact
    path: Path
    source: str
    size: int
    seconds: float = 0.0


def fetch_command(need: str) -> str:
    fmt = next((f for f, needs in format_needs().items() if needs == (need,)), None)
    return f"tablemgmt jars fetch --format {fmt}" if fmt else f"tablemgmt jars fetch --need {need}"


def unknown_needs(names: Iterable[str]) -> list[str]:
    return sorted(set(names) - set(all_needs()))


def wheel_jar(artifact: Artifact) -> Path | None:
    """The Iceberg runtime inside the installed ``snowpark-connect-deps-iceberg`` package, or None.

    Located with ``find_spec`` so the package is never imported (it is an install extra).
    """
    if artifact != ICEBERG_RUNTIME:
        return None
    spec = importlib.util.find_spec(WHEEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        jar = Path(location) / "jars" / f"iceberg-spark-runtime-{SPARK_SCALA}-{ICEBERG_VERSION}.jar"
        if jar.is_file():
            return jar.resolve()
    return None


def _record_path(jar: Path) -> Path:
    return jar.with_name(jar.name + ".verified")


def cached_jar(artifact: Artifact, directory: Path) -> Path | None:
    """The cached jar when it was verified and still has the size it was verified at, else None."""
    jar = directory / artifact.repository_path
    try:
        record = json.loads(_record_path(jar).read_text())
        return jar if jar.stat().st_size == record["size"] else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def resolve(
    needs: Iterable[str],
    settings: ArtifactSettings | None = None,
    *,
    use_wheel: bool = True,
    progress: Callable[[str], None] = log.info,
) -> list[Resolved]:
    """The artifacts of ``needs`` (in order, without repeats) as verified local files.

    A missing artifact is downloaded (``progress`` reports each download) unless ``settings.offline``;
    any failure raises :class:`ArtifactError` naming the coordinate and what to do.
    """
    settings = settings or ArtifactSettings()
    bad = unknown_needs(needs := list(needs))
    if bad:
        raise ArtifactError(f"unknown Spark artifact need(s) {bad}; known: {sorted(all_needs())}")
    out: list[Resolved] = []
    seen: set[Artifact] = set()
    known = all_needs()
    for name in needs:
        for artifact in known[name].artifacts:
            if artifact in seen:
                continue
            seen.add(artifact)
            out.append(_resolve_one(name, artifact, settings, use_wheel, progress))
    return out


def iceberg_runtime_jar(settings: ArtifactSettings | None = None) -> Path:
    """Iceberg's Spark runtime as a local jar (the wheel's, else the cache's, else downloaded)."""
    return resolve(["iceberg"], settings)[0].path


def jar_paths(needs: Iterable[str], settings: ArtifactSettings | None = None) -> list[str]:
    """:func:`resolve`, as the paths ``spark-submit --jars`` takes."""
    return [str(r.path) for r in resolve(needs, settings)]


def driver_class_path(needs: Iterable[str], settings: ArtifactSettings | None = None) -> list[str]:
    """The jars of ``needs`` that belong on the driver's class path too: a format's runtime whose session
    says so (``FormatSession.driver_class_path``; Hudi's bundle, see formats/hudi)."""
    from airflow_tablemgmt.core.formats import FORMATS

    on_driver = {f.name for f in FORMATS.all() if f.session.driver_class_path}
    wanted = [n for n in dict.fromkeys(needs) if n in on_driver]
    return jar_paths(wanted, settings) if wanted else []


def _resolve_one(
    need: str,
    artifact: Artifact,
    settings: ArtifactSettings,
    use_wheel: bool,
    progress: Callable[[str], None],
) -> Resolved:
    if use_wheel and (jar := wheel_jar(artifact)) is not None:
        return Resolved(need, artifact, jar, "wheel", jar.stat().st_size)
    if (jar := cached_jar(artifact, settings.directory)) is not None:
        return Resolved(need, artifact, jar, "cache", jar.stat().st_size)
    if settings.offline:
        raise ArtifactError(
            f"{artifact.coordinate} ({need}) is not in the jar cache {settings.directory} and downloads are off "
            f"([tablemgmt] jars_offline); fetch it where Maven is reachable with `{fetch_command(need)}` "
            f"(into the same jars_dir) and copy the directory here"
        )
    return _download(need, artifact, settings, progress)


def _open(url: str):  # type: ignore[no-untyped-def]
    # urllib (http.client, ssl, email) is imported only when something is downloaded: a task whose jars
    # are cached never pays for it.
    import urllib.request

    return urllib.request.urlopen(
        urllib.request.Request(url, headers={"User-Agent": "airflow-tablemgmt"}), timeout=_TIMEOUT_S
    )


def _repository_checksum(url: str) -> tuple[str, str]:
    """The strongest checksum the repository publishes for ``url``: (algorithm, hex digest)."""
    import urllib.error

    for algorithm in _CHECKSUMS:
        try:
            with _open(f"{url}.{algorithm}") as r:
                text = r.read(4096).decode("ascii", "replace").strip()
        except urllib.error.HTTPError as e:
            if e.code == 404:
                continue
            raise
        digest = text.split()[0].lower() if text else ""
        if digest:
            return algorithm, digest
    raise ArtifactError(f"the repository publishes no checksum ({', '.join(_CHECKSUMS)}) for {url}")


def _download(
    need: str, artifact: Artifact, settings: ArtifactSettings, progress: Callable[[str], None]
) -> Resolved:
    url = f"{settings.repository.rstrip('/')}/{artifact.repository_path}"
    jar = settings.directory / artifact.repository_path
    started = time.monotonic()
    try:
        algorithm, expected = _repository_checksum(url)
        jar.parent.mkdir(parents=True, exist_ok=True)
        # A private temporary name: concurrent fetches on one host each write their own file and the
        # last rename wins with identical bytes; an interrupted download never looks like a jar.
        part = jar.with_name(f".{jar.name}.{os.getpid()}.{time.monotonic_ns()}.part")
        digest = hashlib.new(algorithm)
        size = 0
        try:
            with _open(url) as r, part.open("wb") as f:
                total = r.headers.get("Content-Length")
                progress(
                    f"fetching {artifact.coordinate} ({_mb(int(total)) if total else 'size unknown'}) from {url}"
                )
                while chunk := r.read(_CHUNK):
                    digest.update(chunk)
                    f.write(chunk)
                    size += len(chunk)
            if digest.hexdigest() != expected:
                raise ArtifactError(
                    f"{artifact.coordinate}: {algorithm} {digest.hexdigest()} of the downloaded file does not "
                    f"match the repository's {expected} ({url}); nothing was kept"
                )
            os.replace(part, jar)
        finally:
            part.unlink(missing_ok=True)
        record = {"algorithm": algorithm, "digest": expected, "size": size, "url": url}
        _record_path(jar).write_text(json.dumps(record) + "\n")
    except ArtifactError:
        raise
    except OSError as e:  # urllib's URLError and HTTPError are OSErrors
        raise ArtifactError(
            f"could not fetch {artifact.coordinate} ({need}) from {settings.repository}: {e}. On a worker "
            f"without access to Maven, run `{fetch_command(need)}` where it is reachable and copy "
            f"{settings.directory} here (or set [tablemgmt] jars_dir / maven_repository)"
        ) from None
    seconds = time.monotonic() - started
    progress(f"fetched {artifact.coordinate}: {_mb(size)} in {seconds:.1f} s, {algorithm} verified")
    return Resolved(need, artifact, jar, "downloaded", size, seconds)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


_OBJECT_STORE_NEEDS = (
    (("s3://", "s3a://", "s3n://"), "aws"),
    (("gs://",), "gcp"),
    (("abfs://", "abfss://", "wasb://", "wasbs://"), "azure"),
)


def catalog_needs(catalog: CatalogSpec) -> list[str]:
    """What a job on a table of ``catalog`` needs: its format's runtime (Iceberg's unless the factory marked
    the job's catalog with another format: its descriptor's session, ``spark/conf.py``; a table of one format
    never loads another's), the object store's bundle its warehouse or properties point at (or its
    ``io-impl`` names), and the JDBC driver of a JDBC catalog."""
    from airflow_tablemgmt.spark.conf import format_session

    own = list(format_session(catalog).needs)
    needs = list(own)
    values = [catalog.warehouse or "", *(str(v) for v in catalog.properties.values())]
    io_impl = str(catalog.properties.get("io-impl", ""))
    for schemes, need in _OBJECT_STORE_NEEDS:
        if any(v.lower().startswith(schemes) for v in values):
            needs.append(need)
    s3_settings = any(
        k.startswith(("s3.", "client.region", "glue.", "rest.sigv4")) for k in catalog.properties
    )
    # A REST or Hive catalog's tables are wherever the service says, most often S3, with settings the
    # service may send (vended credentials): its FileIO needs the AWS SDK unless another store is named.
    remote = (
        catalog.type in (CatalogType.REST, CatalogType.HIVE)
        and len(needs) == len(own)
        and not any(k.startswith(("gcs.", "adls.")) for k in catalog.properties)
    )
    if catalog.type == CatalogType.GLUE or ".aws." in io_impl or s3_settings or remote:
        needs.append("aws")
    if ".gcp." in io_impl:
        needs.append("gcp")
    if ".azure." in io_impl:
        needs.append("azure")
    # Hadoop's own filesystem on S3: a hadoop catalog reads its metadata through it.
    warehouse = (catalog.warehouse or "").lower()
    if catalog.type == CatalogType.HADOOP and warehouse.startswith(("s3://", "s3a://", "s3n://")):
        needs.append("hadoop-aws")
    if catalog.type == CatalogType.JDBC and str(catalog.properties.get("uri", "")).startswith(
        "jdbc:postgresql:"
    ):
        needs.append("postgresql")
    return list(dict.fromkeys(needs))
