"""The artifact resolver against a real HTTP server laid out as a Maven repository (no JVM, no Internet).

Checked: a download is verified against the repository's strongest checksum and renamed into place; a
mismatch keeps nothing; a cached jar is used without the network; offline, a missing jar is an error
naming its coordinate and the fetch command; an unreachable repository says what to do; the Iceberg
runtime comes from the wheel when one is installed; concurrent fetches of one jar leave one good file.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.spark.launch import artifacts
from airflow_tablemgmt.spark.launch.artifacts import (
    ArtifactError,
    ArtifactSettings,
    all_needs,
    cached_jar,
    catalog_needs,
    resolve,
)
from airflow_tablemgmt.spark.launch.submit import merge_user_jars

POSTGRES = all_needs()["postgresql"].artifacts[0]
DELTA = all_needs()["delta"].artifacts


@dataclass
class Repository:
    """A directory served over HTTP; ``requests`` counts the GETs by path."""

    root: Path
    url: str
    requests: list[str] = field(default_factory=list)

    def publish(
        self, artifact: artifacts.Artifact, content: bytes, checksums: tuple[str, ...] = ("sha1",)
    ) -> None:
        path = self.root / artifact.repository_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        for algorithm in checksums:
            digest = hashlib.new(algorithm, content).hexdigest()
            Path(f"{path}.{algorithm}").write_text(f"{digest}  {path.name}\n")


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repository]:
    root = tmp_path / "maven"
    root.mkdir()
    seen: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):  # type: ignore[no-untyped-def]
            super().__init__(*a, directory=str(root), **kw)

        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.path)
            super().do_GET()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Repository(root, f"http://127.0.0.1:{server.server_port}", seen)
    finally:
        server.shutdown()
        server.server_close()


def _settings(repo: Repository, tmp_path: Path, offline: bool = False) -> ArtifactSettings:
    return ArtifactSettings(directory=tmp_path / "jars", repository=repo.url, offline=offline)


def test_download_is_verified_with_the_strongest_checksum_and_then_served_from_the_cache(
    repo: Repository, tmp_path: Path
) -> None:
    repo.publish(POSTGRES, b"driver bytes", checksums=("sha1", "sha256"))
    settings = _settings(repo, tmp_path)
    lines: list[str] = []
    [got] = resolve(["postgresql"], settings, progress=lines.append)
    assert got.source == "downloaded" and got.path.read_bytes() == b"driver bytes"
    assert "sha256 verified" in lines[-1] and POSTGRES.coordinate in lines[0]
    assert not list(got.path.parent.glob(".*.part"))
    # sha512 is asked first (absent: 404), then sha256 is found; sha1 is never needed.
    assert [p.rsplit(".", 1)[-1] for p in repo.requests if not p.endswith(".jar")] == ["sha512", "sha256"]
    repo.requests.clear()
    [again] = resolve(["postgresql"], settings)
    assert again.source == "cache" and again.path == got.path and repo.requests == []


def test_a_checksum_mismatch_keeps_nothing(repo: Repository, tmp_path: Path) -> None:
    repo.publish(POSTGRES, b"good")
    (repo.root / POSTGRES.repository_path).write_bytes(b"tampered")  # the jar no longer matches
    settings = _settings(repo, tmp_path)
    with pytest.raises(ArtifactError, match="does not match the repository's") as e:
        resolve(["postgresql"], settings)
    assert POSTGRES.coordinate in str(e.value)
    assert cached_jar(POSTGRES, settings.directory) is None
    assert not [p for p in (tmp_path / "jars").rglob("*") if p.is_file()]


def test_offline_a_missing_jar_names_its_coordinate_and_the_command(repo: Repository, tmp_path: Path) -> None:
    with pytest.raises(ArtifactError) as e:
        resolve(["delta"], _settings(repo, tmp_path, offline=True))
    message = str(e.value)
    assert DELTA[0].coordinate in message and "tablemgmt jars fetch --format delta" in message
    assert repo.requests == []


def test_an_unreachable_repository_says_what_to_do(tmp_path: Path) -> None:
    settings = ArtifactSettings(directory=tmp_path / "jars", repository="http://127.0.0.1:1/maven2")
    with pytest.raises(ArtifactError) as e:
        resolve(["postgresql"], settings)
    assert POSTGRES.coordinate in str(e.value) and "tablemgmt jars fetch --need postgresql" in str(e.value)


def test_a_missing_artifact_and_a_missing_checksum_are_errors(repo: Repository, tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="publishes no checksum"):
        resolve(["postgresql"], _settings(repo, tmp_path))
    repo.publish(POSTGRES, b"x", checksums=())
    with pytest.raises(ArtifactError, match="publishes no checksum"):
        resolve(["postgresql"], _settings(repo, tmp_path))


def test_a_cached_jar_of_another_size_than_verified_is_fetched_again(
    repo: Repository, tmp_path: Path
) -> None:
    repo.publish(POSTGRES, b"driver")
    settings = _settings(repo, tmp_path)
    [got] = resolve(["postgresql"], settings)
    got.path.write_bytes(b"driv")  # truncated after it was verified
    assert cached_jar(POSTGRES, settings.directory) is None
    [again] = resolve(["postgresql"], settings)
    assert again.source == "downloaded" and again.path.read_bytes() == b"driver"


def test_concurrent_fetches_of_one_jar_leave_one_good_file(repo: Repository, tmp_path: Path) -> None:
    content = bytes(range(256)) * 4096
    repo.publish(POSTGRES, content)
    settings = _settings(repo, tmp_path)
    with ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(lambda _: resolve(["postgresql"], settings, progress=lambda _m: None), range(4))
        )
    assert {r[0].path for r in results} == {settings.directory / POSTGRES.repository_path}
    assert (settings.directory / POSTGRES.repository_path).read_bytes() == content
    assert not list((settings.directory / POSTGRES.repository_path).parent.glob(".*.part"))


def test_needs_keep_order_without_repeats_and_unknown_needs_are_refused(
    repo: Repository, tmp_path: Path
) -> None:
    for a in DELTA:
        repo.publish(a, a.name.encode())
    got = resolve(["delta", "delta"], _settings(repo, tmp_path))
    assert [r.artifact for r in got] == list(DELTA)
    with pytest.raises(ArtifactError, match="unknown Spark artifact need"):
        resolve(["iceberg", "lance"], _settings(repo, tmp_path))


def test_the_iceberg_runtime_comes_from_the_wheel_without_the_network(tmp_path: Path) -> None:
    if artifacts.wheel_jar(artifacts.ICEBERG_RUNTIME) is None:
        pytest.skip("the [embedded] wheel is not installed")
    settings = ArtifactSettings(directory=tmp_path / "jars", repository="http://127.0.0.1:1", offline=True)
    [got] = resolve(["iceberg"], settings)
    assert got.source == "wheel" and got.path.name == artifacts.ICEBERG_RUNTIME.file_name


@pytest.mark.parametrize(
    ("catalog", "needs"),
    [
        (CatalogSpec(name="c", warehouse="/data/wh"), ["iceberg"]),
        (
            CatalogSpec(
                name="c", type=CatalogType.REST, properties={"uri": "http://r", "warehouse": "s3://b/w"}
            ),
            ["iceberg", "aws"],
        ),
        (CatalogSpec(name="c", type=CatalogType.GLUE, warehouse="s3://b/w"), ["iceberg", "aws"]),
        (
            CatalogSpec(
                name="c",
                type=CatalogType.HADOOP,
                warehouse="s3a://b/w",
                properties={"allow-unsafe-commits": "true"},
            ),
            ["iceberg", "aws", "hadoop-aws"],
        ),
        (
            CatalogSpec(
                name="c", type=CatalogType.REST, properties={"uri": "http://r", "s3.endpoint": "http://s3"}
            ),
            ["iceberg", "aws"],
        ),
        (CatalogSpec(name="c", type=CatalogType.REST, properties={"uri": "http://r"}), ["iceberg", "aws"]),
        (
            CatalogSpec(
                name="c", type=CatalogType.JDBC, properties={"uri": "jdbc:sqlite:/x"}, warehouse="/w"
            ),
            ["iceberg"],
        ),
        (
            CatalogSpec(
                name="c", type=CatalogType.HIVE, properties={"uri": "thrift://h:9083"}, warehouse="gs://b/w"
            ),
            ["iceberg", "gcp"],
        ),
        (
            CatalogSpec(name="c", type=CatalogType.JDBC, properties={"uri": "jdbc:postgresql://h/db"}),
            ["iceberg", "postgresql"],
        ),
    ],
)
def test_what_a_catalog_needs(catalog: CatalogSpec, needs: list[str]) -> None:
    assert catalog_needs(catalog) == needs


def test_user_jars_and_packages_are_merged_not_dropped() -> None:
    ours = ["/cache/iceberg.jar"]
    # --conf (catalog properties) wins over spark-defaults.conf, as in spark-submit; both keys leave conf.
    conf, jars, packages = merge_user_jars(
        {"spark.jars": "/u/a.jar, /cache/iceberg.jar", "spark.ui.enabled": "false"},
        {"spark.jars": "/defaults/ignored.jar", "spark.jars.packages": "org.x:y:1,org.z:w:2"},
        ours,
    )
    assert conf == {"spark.ui.enabled": "false"}
    assert jars == ["/cache/iceberg.jar", "/u/a.jar"]
    assert packages == ["org.x:y:1", "org.z:w:2"]
    conf, jars, packages = merge_user_jars({}, {"spark.jars": "/defaults/d.jar"}, ours)
    assert jars == ["/cache/iceberg.jar", "/defaults/d.jar"] and packages == [] and conf == {}


def test_a_delta_or_hudi_job_gets_its_own_runtime_and_not_icebergs() -> None:
    """The factory marks the job's catalog with the table's format; the jars follow it."""
    from airflow_tablemgmt.core.formats import TABLE_FORMAT_PROPERTY
    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.spark.launch.artifacts import catalog_needs

    for fmt in ("delta", "hudi"):
        local = CatalogSpec(name="p", warehouse="/wh", properties={TABLE_FORMAT_PROPERTY: fmt})
        assert catalog_needs(local) == [fmt]
        on_s3 = CatalogSpec(
            name="p",
            warehouse="s3://b/wh",
            properties={TABLE_FORMAT_PROPERTY: fmt, "allow-unsafe-commits": "true"},
        )
        assert catalog_needs(on_s3)[0] == fmt and "iceberg" not in catalog_needs(on_s3)
    assert catalog_needs(CatalogSpec(name="i", warehouse="/wh")) == ["iceberg"]
