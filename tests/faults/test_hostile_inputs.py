"""Every hostile input of issue 9 is rejected through the `tablemgmt` CLI: exit code 2, one `error:`
line naming the field, and nothing written to the store (every ``tms_*`` row unchanged).

The CLI's ``main(argv)`` runs in this process (argument parsing, services, error printing, exit code:
everything but the console-script shim), so the table of cases costs milliseconds each instead of a
10 s Python start; ``tests/e2e/test_cli*.py`` run the installed binary."""

from __future__ import annotations

import contextlib
import io
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.faults.conftest import Figures

pytestmark = pytest.mark.faults

GOOD_YAML = """version: 1
catalogs:
  - {name: lake, type: hadoop, warehouse: /tmp/tms-hostile-wh}
tables:
  - {catalog: lake, namespace: sales, name: orders, actions: {expire-snapshots: {older-than: 5d}}}
"""
REGISTERED = "lake.sales.events"

# (case, how: "register" args or "apply" file text, what the error must name)
CASES: list[tuple[str, list[str] | str, list[str]]] = [
    ("bare-number duration", ["--set", "expire-data.retention=30"], ["expire-data", "retention", "30d"]),
    ("negative bare number", ["--set", "expire-data.retention=-1"], ["retention"]),
    ("negative duration", ["--set", "expire-data.retention=-1d"], ["retention", "-1d"]),
    (
        "zero duration",
        ["--action", "expire-snapshots", "--set", "expire-snapshots.older-than=0d"],
        ["older-than"],
    ),
    (
        "bare-number older-than",
        ["--action", "expire-snapshots", "--set", "expire-snapshots.older-than=0"],
        ["older-than"],
    ),
    ("retention below the 1-day floor", ["--set", "expire-data.retention=2h"], ["retention"]),
    ("huge retention", ["--set", "expire-data.retention=99999999999d"], ["retention", "99999999999d"]),
    (
        "relative warehouse (new catalog)",
        [
            "lake2.sales.t",
            "--catalog-type",
            "hadoop",
            "--warehouse",
            "../../tmp",
            "--action",
            "rewrite-files",
        ],
        ["warehouse", "../../tmp"],
    ),
    (
        "register re-pointing an existing catalog",
        [
            "lake3.sales.other",
            "--catalog-type",
            "hadoop",
            "--warehouse",
            "/tmp/elsewhere",
            "--action",
            "rewrite-files",
        ],
        ["lake3", "warehouse"],
    ),
    ("name with a newline", GOOD_YAML.replace("name: orders,", 'name: "orders\\n",'), ["name"]),
    (
        "catalogs: 5",
        GOOD_YAML.replace(
            "catalogs:\n  - {name: lake, type: hadoop, warehouse: /tmp/tms-hostile-wh}", "catalogs: 5"
        ),
        ["catalogs"],
    ),
    (
        "huge retention in YAML",
        GOOD_YAML.replace(
            "expire-snapshots: {older-than: 5d}", "expire-data: {column: ts, retention: 99999999999d}"
        ),
        ["retention"],
    ),
    (
        "plaintext secret",
        GOOD_YAML.replace(
            "{name: lake, type: hadoop, warehouse: /tmp/tms-hostile-wh}",
            "{name: lake, type: rest, warehouse: s3://b/w, "
            "properties: {uri: 'http://cat:8181', token: s3cr3t-plaintext}}",
        ),
        ["token"],
    ),
    (
        "rest catalog without uri",
        GOOD_YAML.replace(
            "{name: lake, type: hadoop, warehouse: /tmp/tms-hostile-wh}",
            "{name: lake, type: rest, warehouse: s3://b/w}",
        ),
        ["uri"],
    ),
    ("empty tables.yaml", "", ["tables"]),
]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def tablemgmt(store_url: str, *args: str) -> Result:
    from airflow_tablemgmt import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(["--store-url", store_url, *args])
        except SystemExit as e:  # argparse usage errors
            code = int(e.code or 0)
    return Result(code, out.getvalue(), err.getvalue())


def store_rows(db: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(db) as conn:
        names = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'tms_%'")
        ]
        return {n: sorted(map(tuple, conn.execute(f'SELECT * FROM "{n}"')), key=repr) for n in names}


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    work = tmp_path_factory.mktemp("hostile")
    db = work / "tablemgmt.db"
    url = f"sqlite:///{db}"
    good = work / "tables.yaml"
    good.write_text(GOOD_YAML)
    for args in (
        ["apply", str(good)],
        [
            "register",
            REGISTERED,
            "--action",
            "expire-data",
            "--set",
            "expire-data.column=ts",
            "--set",
            "expire-data.retention=400d",
        ],
        [
            "register",
            "lake3.sales.base",
            "--catalog-type",
            "hadoop",
            "--warehouse",
            "/tmp/tms-hostile-wh3",
            "--action",
            "rewrite-files",
        ],  # a store-owned catalog that a later register must not re-point
    ):
        res = tablemgmt(url, *args)
        assert res.returncode == 0, res.stdout + res.stderr
    return url, db, work


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_hostile_input_is_rejected_naming_the_field_and_nothing_is_written(
    case: str, seeded: tuple[str, Path, Path], figures: Figures
) -> None:
    url, db, work = seeded
    how, names = next((h, n) for c, h, n in CASES if c == case)
    if isinstance(how, str):
        path = work / f"hostile-{abs(hash(case))}.yaml"
        path.write_text(how)
        args = ["apply", str(path)]
    elif how[0].count(".") == 2:
        args = ["register", *how]
    else:
        args = ["register", REGISTERED, *how]
    before = store_rows(db)
    res = tablemgmt(url, *args)
    after = store_rows(db)
    figures.rounds = 1
    figures.late_writes_applied = int(after != before)
    out = res.stdout + res.stderr
    assert after == before, f"{case}: the store changed\n{out}"
    if case == "empty tables.yaml" and res.returncode == 0:  # accepted as "declares nothing": prunes nothing
        assert "0 removed" in res.stdout, out
        return
    assert res.returncode == 2, f"{case}: exit {res.returncode}\n{out}"
    assert "Traceback" not in out and "error:" in res.stderr, out
    missing = [n for n in names if n not in res.stderr]
    assert not missing, f"{case}: the error does not name {missing}: {res.stderr}"
    assert "s3cr3t-plaintext" not in out  # a secret is never echoed back
