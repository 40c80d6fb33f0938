"""``tablemgmt dt alter --timeout`` changes a dynamic table's refresh limit through the same service as
REST's PATCH (no Spark: only the definition changes); a bad value is one ``error:`` line naming the
field, the value and what is allowed, exit 2, and nothing changes."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from airflow_tablemgmt.cli import main
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.store import Store

T = "lake.agg.daily"


def test_dt_alter_timeout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_tablemgmt.core.dynamic import DynamicTableSpec

    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    spec = {"identifier": T, "query": "SELECT 1 AS x", "freshness": "1 DAY"}
    store.dynamic.upsert(DynamicTableSpec.model_validate(spec), Owner.STORE, state="ACTIVE")

    assert main(["--store-url", url, "dt", "alter", T, "--timeout", "45m"]) == 0
    assert capsys.readouterr().out.strip() == f"{T}: altered timeout"
    assert store.dynamic.get(T).definition.timeout == timedelta(minutes=45)

    assert main(["--store-url", url, "dt", "alter", T, "--timeout", "45"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "timeout" in err and "'45' has no unit" in err, err
    assert store.dynamic.get(T).definition.timeout == timedelta(minutes=45)
    store.dispose()
