"""formats/hudi/metadata.py on ``.hoodie`` timelines named as Hudi 1.x (``timeline/``) and 0.x write them."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_tablemgmt.formats.hudi.metadata import read_timeline
from airflow_tablemgmt.metadata.errors import HealthUnavailable


def table(root: Path, names: list[str], *, version_1: bool = True, mor: bool = True) -> Path:
    hoodie = root / ".hoodie"
    timeline = hoodie / "timeline" if version_1 else hoodie
    timeline.mkdir(parents=True)
    kind = "MERGE_ON_READ" if mor else "COPY_ON_WRITE"
    (hoodie / "hoodie.properties").write_text(f"hoodie.table.name=t\nhoodie.table.type={kind}\n")
    for n in names:
        (timeline / n).write_text("")
    return root


def test_delta_commits_since_the_last_compaction_and_pending_ones(tmp_path: Path) -> None:
    root = table(
        tmp_path,
        [
            "20261125100000000.deltacommit.requested",
            "20261125100000000.deltacommit.inflight",
            "20261125100000000_20261125100001000.deltacommit",
            "20261125100100000_20261125100101000.deltacommit",
            "20261125100200000.compaction.requested",
            "20261125100200000.compaction.inflight",
            "20261125100200000_20261125100201000.commit",
            "20261125100300000_20261125100301000.deltacommit",
            "20261125100400000_20261125100401000.deltacommit",
            "20261125100500000.compaction.requested",
            "20261125100600000.deltacommit.requested",
            "20261125100600000.deltacommit.inflight",
            ".20261125100400000_20261125100401000.deltacommit.crc",
        ],
    )
    t = read_timeline(str(root))
    assert t.merge_on_read
    assert t.completed_compactions() == ["20261125100200000"]
    assert t.delta_commits_since_compaction() == 2
    assert t.pending_compactions() == ["20261125100500000"]
    assert ("20261125100600000", "deltacommit", "inflight") in t.pending
    assert t.latest_instant == "20261125100400000"
    assert t.commits_since_clean() == 5
    assert t.summary()["current_snapshot_id"] == 20261125100400000


def test_the_0x_layout_and_a_clean(tmp_path: Path) -> None:
    root = table(
        tmp_path,
        [
            "20240101000000.commit",
            "20240101000100.clean.requested",
            "20240101000100.clean",
            "20240101000200.commit",
        ],
        version_1=False,
        mor=False,
    )
    t = read_timeline(str(root))
    assert not t.merge_on_read
    assert t.commits_since_clean() == 1
    assert t.pending_compactions() == []


def test_not_a_hudi_table(tmp_path: Path) -> None:
    with pytest.raises(HealthUnavailable, match="not a Hudi table"):
        read_timeline(str(tmp_path))


def test_a_failed_clustering_costs_health_until_a_clustering_completes(tmp_path: Path) -> None:
    """A clustering that failed leaves its plan pending: the table's health names it (it scored 100 before,
    as if the clustering had helped); a later completed clustering of that instant clears it."""
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
    from airflow_tablemgmt.formats.hudi.metadata import table_health

    root = table(
        tmp_path / "ns" / "t",
        [
            "20261125100000000_20261125100001000.commit",
            "20261125100100000_20261125100101000.clean",
            "20261125100200000.clustering.requested",
            "20261125100200000.clustering.inflight",
        ],
        mor=False,
    )
    catalog = CatalogSpec(name="lake", warehouse=str(tmp_path))
    spec = TableSpec(
        catalog="lake",
        namespace="ns",
        name="t",
        format="hudi",
        actions={"clustering": {"sort-columns": ["id"]}},
    )
    health = table_health(catalog, spec)
    assert read_timeline(str(root)).pending_clusterings() == ["20261125100200000"]
    kinds = {f.kind: f for f in health.findings}
    assert kinds["pending_clustering"].action == "clustering" and health.figures["pending_clusterings"] == 1
    (root / ".hoodie" / "timeline" / "20261125100200000_20261125100301000.replacecommit").write_text("")
    assert "pending_clustering" not in {f.kind for f in table_health(catalog, spec).findings}
