"""The per-host cache of built DAGs (``dag_cache``): a hit gives what a fresh build gives, exactly the
tables whose inputs changed are built again, and a bad cache file is a WARNING and a full build."""

from __future__ import annotations

import logging
import os
import pickle
import stat
from pathlib import Path

import pytest

from airflow_tablemgmt.core.naming import BROKEN_DAG_ID
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.dag_factory import cache as dag_cache
from airflow_tablemgmt.dag_factory.dag_file import load_registry_and_build
from airflow_tablemgmt.store import Store

YAML = """\
catalogs:
  - {name: lake, warehouse: /data/wh}
tables:
  - catalog: lake
    namespace: s
    name: every
    owner: team-a
    queue: spark_pool
    priority: 7
    actions:
      compute-stats: {}
      delete-orphans: {}
      expire-data: {column: c, retention: 30d}
      expire-snapshots: {retries: 3, retry-delay: 2m}
      rewrite-deletes: {trigger: schedule, interval: 6h}
      rewrite-files: {min-input-files: 2, interval: "0 3 * * *", fallback-interval: 2d}
      rewrite-manifests: {trigger: event, poll-interval: 30s}
  - {catalog: lake, namespace: s, name: plain, actions: {rewrite-files: {}}}
  - {catalog: lake, namespace: s, name: gated, actions: {rewrite-files: {trigger: schedule, on-new-snapshot: true}}}
dynamic-tables:
  - identifier: lake.db.daily
    query: SELECT day, count(*) AS n FROM lake.db.events GROUP BY day
    freshness: 1 DAY
  - {identifier: lake.db.weekly, query: SELECT * FROM lake.db.daily, freshness: downstream}
  - {identifier: lake.db.monthly, query: SELECT * FROM lake.db.weekly, freshness: downstream}
"""
EVERY = "lake.s.every"


def spec(catalog: str, name: str, actions: dict) -> TableSpec:  # type: ignore[type-arg]
    return TableSpec.model_validate({"catalog": catalog, "namespace": "s", "name": name, "actions": actions})


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", str(d))
    return d


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    s.catalogs.upsert(CatalogSpec(name="other", warehouse="/data/other"), Owner.STORE)
    s.tables.upsert(spec("other", "stored", {"rewrite-files": {}, "expire-snapshots": {}}), Owner.STORE)
    s.tables.upsert(spec("other", "stored2", {"compute-stats": {"trigger": "schedule"}}), Owner.STORE)
    yield s
    s.dispose()


@pytest.fixture
def yaml(tmp_path: Path) -> Path:
    y = tmp_path / "dags" / "tables.yaml"
    y.parent.mkdir()
    y.write_text(YAML)
    return y


def serialized(dags: dict) -> dict:  # type: ignore[type-arg]
    from airflow.serialization.serialized_objects import DagSerialization

    return {dag_id: DagSerialization.to_dict(dag) for dag_id, dag in dags.items()}


def parse(yaml: Path, store: Store):  # type: ignore[no-untyped-def]
    return load_registry_and_build(yaml, store=store)


def the_file(cache: Path) -> Path:
    [f] = [p for p in cache.iterdir() if p.suffix == ".pickle"]
    return f


def cached_tables(cache: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    """Table id -> its cached DAGs, as the file holds them."""
    out = {}
    for blob, meta in pickle.loads(the_file(cache).read_bytes())["shards"].values():
        dags = pickle.loads(blob)
        assert set(dags) == set(meta)
        out.update(dags)
    return out


def test_a_hit_gives_the_dags_a_fresh_build_gives(cache: Path, yaml: Path, store: Store) -> None:
    first = parse(yaml, store)
    assert sorted(dag_cache.last_stats.built) == sorted({d.split("__")[1] for d in first.dags})
    assert dag_cache.last_stats.wrote and dag_cache.last_stats.hits == 0
    hit = parse(yaml, store)
    stats = dag_cache.last_stats
    assert stats.built == [] and stats.hits == 8 and not stats.wrote
    assert list(hit.dags) == list(first.dags)
    assert len(hit.dags) == 7 + 1 + 1 + 3 + 2 + 1
    assert serialized(hit.dags) == serialized(first.dags)
    # Nothing of the build's moment or caller is kept: Airflow sets last_loaded when it bags a DAG.
    for dag_id, dag in hit.dags.items():
        assert dag.last_loaded is None and dag.fileloc == first.dags[dag_id].fileloc
    # The table's DAGs still share its one asset (one watcher per table).
    for dags in (first.dags, hit.dags):
        assets = {
            id(d.timetable.asset_condition)
            for i, d in dags.items()
            if i.startswith(f"tms__{EVERY}__") and getattr(d.timetable, "asset_condition", None) is not None
        }
        assert len(assets) == 1


def test_a_hit_equals_a_build_with_the_cache_off(
    cache: Path, yaml: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    parse(yaml, store)
    hit = parse(yaml, store)
    assert dag_cache.last_stats.hits == 8
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", "off")
    off = parse(yaml, store)
    assert dag_cache.last_stats.discarded == "off" and dag_cache.last_stats.path is None
    assert serialized(hit.dags) == serialized(off.dags)


def test_cache_off_writes_nothing(tmp_path: Path, yaml: Path, store: Store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", "off")
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    parse(yaml, store)
    assert not (tmp_path / "home").exists()


def test_default_location_is_under_airflow_home_with_private_modes(
    tmp_path: Path, yaml: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    parse(yaml, store)
    d = tmp_path / "home" / "tablemgmt" / "dag-cache"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE(the_file(d).stat().st_mode) == 0o600
    assert [p.name for p in d.iterdir()] == [the_file(d).name]  # no temporary file left


def test_a_yaml_edit_rebuilds_that_table_only(cache: Path, yaml: Path, store: Store) -> None:
    parse(yaml, store)
    before = pickle.loads(the_file(cache).read_bytes())["shards"]
    yaml.write_text(
        YAML.replace(
            "name: plain, actions: {rewrite-files: {}}", "name: plain, actions: {rewrite-files: {retries: 4}}"
        )
    )
    result = parse(yaml, store)
    assert dag_cache.last_stats.built == ["lake.s.plain"] and dag_cache.last_stats.wrote
    assert result.dags["tms__lake.s.plain__rewrite-files"].get_task("maintain").retries == 4
    # Only the edited table's shard was pickled again.
    after = pickle.loads(the_file(cache).read_bytes())["shards"]
    assert after.keys() == before.keys()
    assert {n for n in after if after[n] != before[n]} == {dag_cache.shard_of("lake.s.plain")}
    again = parse(yaml, store)
    assert dag_cache.last_stats.built == [] and not dag_cache.last_stats.wrote
    assert again.dags["tms__lake.s.plain__rewrite-files"].get_task("maintain").retries == 4


def test_a_store_update_rebuilds_that_table_only(cache: Path, yaml: Path, store: Store) -> None:
    parse(yaml, store)
    store.tables.upsert(
        spec("other", "stored2", {"compute-stats": {"trigger": "schedule", "retries": 5}}), Owner.STORE
    )
    result = parse(yaml, store)
    assert dag_cache.last_stats.built == ["other.s.stored2"]
    assert result.dags["tms__other.s.stored2__compute-stats"].get_task("maintain").retries == 5


def test_a_catalog_change_rebuilds_its_tables_only(cache: Path, yaml: Path, store: Store) -> None:
    parse(yaml, store)
    store.catalogs.upsert(CatalogSpec(name="other", warehouse="/data/other2"), Owner.STORE)
    result = parse(yaml, store)
    assert sorted(dag_cache.last_stats.built) == ["other.s.stored", "other.s.stored2"]
    watcher = result.dags["tms__other.s.stored__rewrite-files"].timetable.asset_condition.watchers[0]
    assert "/data/other2" in repr(watcher.trigger.serialize())


def test_an_airflow_setting_discards_every_entry(
    cache: Path, yaml: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = parse(yaml, store)
    monkeypatch.setenv("AIRFLOW__CORE__MAX_CONSECUTIVE_FAILED_DAG_RUNS_PER_DAG", "7")
    result = parse(yaml, store)
    assert len(dag_cache.last_stats.built) == 8 and dag_cache.last_stats.hits == 0
    assert all(d.max_consecutive_failed_dag_runs == 7 for i, d in result.dags.items() if i != BROKEN_DAG_ID)
    assert set(result.dags) == set(first.dags)
    parse(yaml, store)
    assert dag_cache.last_stats.hits == 8


def test_airflow_cfg_bytes_discard_every_entry(
    cache: Path, yaml: Path, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.configuration import AIRFLOW_CONFIG

    cfg = Path(AIRFLOW_CONFIG)
    before = cfg.read_bytes() if cfg.exists() else None
    parse(yaml, store)
    try:
        cfg.write_bytes((before or b"") + b"\n# edited\n")
        parse(yaml, store)
        assert len(dag_cache.last_stats.built) == 8
    finally:
        if before is None:
            cfg.unlink()
        else:
            cfg.write_bytes(before)


def test_the_code_discards_every_entry(
    cache: Path, yaml: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    parse(yaml, store)
    real = dag_cache.code_fingerprint()
    monkeypatch.setattr(dag_cache, "code_fingerprint", lambda: real + "-edited")
    parse(yaml, store)
    assert len(dag_cache.last_stats.built) == 8
    assert dag_cache.last_stats.discarded is not None


def test_the_code_fingerprint_follows_the_package_source(tmp_path: Path) -> None:
    """Every .py file of the package counts (a DAG's operators, triggers, factories...)."""
    import shutil

    copy = tmp_path / "airflow_tablemgmt"
    shutil.copytree(
        Path(dag_cache.__file__).parent.parent, copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    a = dag_cache.code_fingerprint(copy)
    assert a == dag_cache.code_fingerprint(copy) != dag_cache.code_fingerprint()
    (copy / "operators" / "probe.py").write_text("# probe\n")
    b = dag_cache.code_fingerprint(copy)
    assert b != a
    (copy / "operators" / "probe.py").write_text("# probe, edited\n")
    assert dag_cache.code_fingerprint(copy) not in (a, b)
    (copy / "operators" / "probe.py").write_text("# probe\n")
    (copy / "operators" / "__pycache__").mkdir(exist_ok=True)
    (copy / "operators" / "__pycache__" / "x.py").write_text("ignored")
    assert dag_cache.code_fingerprint(copy) == b


def test_another_declarations_path_has_its_own_file(
    cache: Path, yaml: Path, store: Store, tmp_path: Path
) -> None:
    parse(yaml, store)
    moved = tmp_path / "elsewhere" / "tables.yaml"
    moved.parent.mkdir()
    moved.write_text(YAML)
    parse(moved, store)
    assert len(dag_cache.last_stats.built) == 8
    assert len([p for p in cache.iterdir() if p.suffix == ".pickle"]) == 2


def test_a_new_upstream_dynamic_table_rebuilds_its_downstream(cache: Path, yaml: Path, store: Store) -> None:
    parse(yaml, store)
    text = YAML + "  - {identifier: lake.db.hourly, query: SELECT * FROM lake.db.events, freshness: 1 HOUR}\n"
    text = text.replace("SELECT * FROM lake.db.daily,", "SELECT * FROM lake.db.daily JOIN lake.db.hourly,")
    yaml.write_text(text)
    result = parse(yaml, store)
    assert sorted(dag_cache.last_stats.built) == ["lake.db.hourly", "lake.db.weekly"]
    names = {a.name for a in result.dags["tms__lake.db.weekly__refresh"].timetable.asset_condition.objects}
    assert names == {"tablemgmt.refresh.lake.db.daily", "tablemgmt.refresh.lake.db.hourly"}


def test_a_removed_table_leaves_the_parse_and_the_cache(cache: Path, yaml: Path, store: Store) -> None:
    parse(yaml, store)
    yaml.write_text(
        YAML.replace("  - {catalog: lake, namespace: s, name: plain, actions: {rewrite-files: {}}}\n", "")
    )
    result = parse(yaml, store)
    assert dag_cache.last_stats.removed == ["lake.s.plain"] and dag_cache.last_stats.wrote
    assert not any("lake.s.plain" in d for d in result.dags)
    entries = cached_tables(cache)
    assert "lake.s.plain" not in entries and EVERY in entries


def _damage(path: Path, how: str) -> None:
    if how == "corrupt":
        path.write_bytes(b"\x80\x05not a pickle at all")
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif how == "world-writable":
        path.chmod(0o666)
    elif how == "foreign-owned":
        os.chown(path, os.getuid() + 4242, -1)
    elif how == "not-a-cache":
        path.write_bytes(pickle.dumps({"format": 999}))
    elif how == "bad-shard":
        content = pickle.loads(path.read_bytes())
        n = dag_cache.shard_of(EVERY)
        content["shards"][n] = (b"\x80\x05garbage", content["shards"][n][1])
        path.write_bytes(pickle.dumps(content))


@pytest.mark.parametrize(
    "how", ["corrupt", "truncated", "world-writable", "foreign-owned", "not-a-cache", "bad-shard"]
)
def test_a_bad_cache_file_is_a_warning_a_full_build_and_rewritten(
    cache: Path, yaml: Path, store: Store, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    if how == "foreign-owned" and os.getuid() != 0:
        pytest.skip("chown to another uid needs root")
    fresh = parse(yaml, store)
    f = the_file(cache)
    _damage(f, how)
    with caplog.at_level(logging.WARNING, logger="airflow_tablemgmt.dag_factory.cache"):
        result = parse(yaml, store)
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name.endswith("dag_factory.cache")
    ]
    assert len(warnings) == 1 and str(f) in warnings[0], warnings
    assert len(dag_cache.last_stats.built) == 8 and dag_cache.last_stats.wrote
    assert serialized(result.dags) == serialized(fresh.dags)
    st = f.stat()
    assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o600
    parse(yaml, store)
    assert dag_cache.last_stats.hits == 8


def test_a_cache_path_that_cannot_be_written_is_a_warning(
    tmp_path: Path,
    yaml: Path,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", str(blocker / "cache"))
    with caplog.at_level(logging.WARNING, logger="airflow_tablemgmt.dag_factory.cache"):
        result = parse(yaml, store)
    assert "could not be written" in caplog.text and str(blocker) in caplog.text
    assert len(result.dags) == 15 and not dag_cache.last_stats.wrote


BROKEN = YAML + "  - {identifier: lake.db.bad, query: SELECT 1, freshness: 5 HOUR}\n"


def test_broken_declarations_are_reported_the_same_on_a_hit(cache: Path, yaml: Path, store: Store) -> None:
    yaml.write_text(BROKEN)
    miss = parse(yaml, store)
    hit = parse(yaml, store)
    assert dag_cache.last_stats.hits == 8 and dag_cache.last_stats.built == []
    assert miss.errors and hit.errors == miss.errors
    assert hit.dags[BROKEN_DAG_ID].description == miss.dags[BROKEN_DAG_ID].description
    assert list(hit.dags)[-1] == BROKEN_DAG_ID
    entries = cached_tables(cache)
    assert len(entries) == 8 and all(BROKEN_DAG_ID not in dags for dags in entries.values())


def test_a_table_whose_build_fails_is_never_cached(cache: Path, yaml: Path, store: Store) -> None:
    """An event-driven action whose catalog is not known fails to build: reported on every parse."""
    store.tables.upsert(spec("nowhere", "lost", {"rewrite-files": {}}), Owner.STORE)
    first = parse(yaml, store)
    second = parse(yaml, store)
    assert "other.s.stored" not in dag_cache.last_stats.built
    assert "nowhere.s.lost" in dag_cache.last_stats.built
    assert any("nowhere.s.lost" in e for e in second.errors) and second.errors == first.errors
    assert "nowhere.s.lost" not in cached_tables(cache)


def test_the_watcher_capacity_warning_counts_cached_tables(
    cache: Path, yaml: Path, store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AIRFLOW__TRIGGERER__CAPACITY", "2")
    parse(yaml, store)
    with caplog.at_level(logging.WARNING, logger="airflow_tablemgmt.dag_factory"):
        parse(yaml, store)
    assert dag_cache.last_stats.hits == 8
    # every, plain, other.s.stored: three tables with event-driven actions.
    assert "tablemgmt: 3 snapshot watchers" in caplog.text


def test_the_single_dag_parse_does_not_read_the_cache(
    cache: Path, yaml: Path, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    parse(yaml, store)
    f = the_file(cache)
    f.write_bytes(b"garbage")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="airflow_tablemgmt.dag_factory.cache"):
        one = load_registry_and_build(yaml, only_dag_id="tms__lake.s.plain__rewrite-files", store=store)
    assert list(one.dags) == ["tms__lake.s.plain__rewrite-files"]
    assert "dag_cache" not in " ".join(r.name for r in caplog.records)
    assert f.read_bytes() == b"garbage"
