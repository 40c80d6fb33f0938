"""`tablemgmt register` updates only what it is given; catalogs change only through `catalog set`;
`apply` of a file that declares no table prunes nothing without `--prune`. The real console script."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import BIN, run

pytestmark = pytest.mark.e2e


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'tablemgmt.db'}"


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run([str(BIN / "tablemgmt"), "--store-url", url, *args], timeout=120)


def ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    assert "Traceback" not in res.stderr
    return res.stdout


def spec(url: str, table: str) -> dict:
    return json.loads(ok(cli(url, "show", table, "--json")))["spec"]


def test_reregistering_changes_only_what_is_given_and_replacing_actions_is_explicit(
    url: str, tmp_path: Path
) -> None:
    t = "lake.s.t"
    wh = str(tmp_path / "wh")
    ok(
        cli(
            url,
            "register",
            t,
            "--warehouse",
            wh,
            "--action",
            "rewrite-files",
            "--action",
            "expire-snapshots",
            "--set",
            "expire-snapshots.retain-last=3",
            "--owner",
            "alice",
        )
    )
    assert "lake.s.t: updated" in ok(cli(url, "register", t, "--owner", "bob"))
    s = spec(url, t)
    assert s["owner"] == "bob"
    assert s["actions"] == {"rewrite-files": {}, "expire-snapshots": {"retain-last": 3}}

    # --set updates one option and keeps the rest (merges in detail: tests/unit/services).
    ok(cli(url, "register", t, "--set", "rewrite-files.min-input-files=2"))
    assert spec(url, t)["actions"] == {
        "rewrite-files": {"min-input-files": 2},
        "expire-snapshots": {"retain-last": 3},
    }

    # Replacing the action set is explicit and says what it removes.
    out = ok(cli(url, "register", t, "--replace-actions", "--action", "expire-snapshots"))
    assert "lake.s.t: removed actions: rewrite-files" in out
    assert spec(url, t)["actions"] == {"expire-snapshots": {}}
    assert spec(url, t)["owner"] == "bob"


def test_registering_never_changes_an_existing_catalog(url: str, tmp_path: Path) -> None:
    wh, other = str(tmp_path / "wh"), str(tmp_path / "elsewhere")
    out = ok(cli(url, "register", "lake.s.a", "--warehouse", wh, "--action", "rewrite-files"))
    assert "catalog lake: created" in out
    ok(cli(url, "register", "lake.s.b", "--warehouse", wh))  # the same settings: fine

    res = cli(url, "register", "lake.s.c", "--warehouse", other)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "catalog lake already exists with type hadoop, warehouse " + wh in res.stderr
    assert f"tablemgmt catalog set lake --type hadoop --warehouse {other}" in res.stderr
    res = cli(url, "register", "lake.s.c", "--warehouse", "../../tmp")
    assert res.returncode == 2 and "'../../tmp'" in res.stderr and "absolute" in res.stderr
    catalogs = json.loads(ok(cli(url, "catalogs", "--json")))
    assert catalogs == [{"name": "lake", "type": "hadoop", "warehouse": wh, "properties": {}}]
    assert "lake.s.c" not in ok(cli(url, "tables"))

    # Changing a catalog is the explicit command.
    assert "catalog lake: updated" in ok(cli(url, "catalog", "set", "lake", "--warehouse", other))
    assert "catalog lake: unchanged" in ok(cli(url, "catalog", "set", "lake", "--warehouse", other))
    out = ok(
        cli(
            url,
            "catalog",
            "set",
            "rest1",
            "--type",
            "rest",
            "--property",
            "uri=http://cat:8181",
            "--property",
            "token=conn:rest_cat",
        )
    )
    assert "catalog rest1: created" in out
    listed = ok(cli(url, "catalogs"))
    assert "lake" in listed and other in listed and "uri=http://cat:8181" in listed
    assert "conn:rest_cat" not in listed and "token=***" in listed


def test_catalog_set_refuses_a_catalog_declared_in_yaml_and_a_plaintext_secret(
    url: str, tmp_path: Path
) -> None:
    decl = tmp_path / "tables.yaml"
    decl.write_text(f"version: 1\ncatalogs:\n  - {{name: code, type: hadoop, warehouse: {tmp_path}/wh}}\n")
    ok(cli(url, "apply", str(decl)))
    res = cli(url, "catalog", "set", "code", "--warehouse", str(tmp_path / "x"))
    assert res.returncode == 2 and "catalog code is managed by dags/tables.yaml" in res.stderr
    res = cli(url, "catalog", "set", "r", "--type", "rest", "--property", "token=plaintext-value")
    assert res.returncode == 2 and "properties.token" in res.stderr and "plaintext-value" not in res.stderr


def test_apply_of_a_file_declaring_no_table_prunes_only_with_prune(url: str, tmp_path: Path) -> None:
    full, empty = tmp_path / "full.yaml", tmp_path / "empty.yaml"
    full.write_text(
        f"version: 1\ncatalogs:\n  - {{name: c, type: hadoop, warehouse: {tmp_path}/wh}}\n"
        "tables:\n  - {catalog: c, namespace: n, name: t, actions: {rewrite-files: {}}}\n"
    )
    empty.write_text("version: 1\ntables: []\n")
    ok(cli(url, "apply", str(full)))
    assert "0 removed" in ok(cli(url, "apply", str(empty)))
    assert "c.n.t" in ok(cli(url, "tables"))
    out = ok(cli(url, "apply", str(empty), "--prune"))
    assert "1 removed" in out and "c.n.t" in out
    assert "c.n.t" not in ok(cli(url, "tables"))
