"""Every way a user can get a `tablemgmt` command wrong ends in `error: ...` on stderr and a non-zero exit,
never a traceback, and never shows a password. Read-only commands never create a store.

Each case runs the real console script once (about a second each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import Store
from tests.e2e.conftest import BIN, run

pytestmark = pytest.mark.e2e

SECRET = "secretpw"


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store with catalog `lake` and table `lake.db.orders` (rewrite-files)."""
    root = tmp_path_factory.mktemp("cli-errors")
    url = f"sqlite:///{root / 'tablemgmt.db'}"
    store = Store(url)
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(root / "wh")), Owner.STORE)
    spec = TableSpec(catalog="lake", namespace="db", name="orders", actions={"rewrite-files": {}})
    store.tables.upsert(spec, Owner.STORE)
    store.dispose()
    return url


def tablemgmt(*args: str) -> tuple[int, str, str]:
    res = run([str(BIN / "tablemgmt"), *args], timeout=120)
    return res.returncode, res.stdout, res.stderr


def assert_clean_error(code: int, stderr: str, *expected: str) -> None:
    assert code != 0, stderr
    assert "Traceback" not in stderr, stderr
    assert stderr.startswith("error: ") or "\nerror: " in stderr, stderr
    assert SECRET not in stderr
    for text in expected:
        assert text in stderr, (text, stderr)


STORE_CASES = {
    # name: (store URL, command, expected parts of the message)
    "unreachable": (f"postgresql://u:{SECRET}@127.0.0.1:1/x", ["tables"], ["127.0.0.1:1", "cannot reach"]),
    "unreachable-psycopg2": (
        f"postgresql+psycopg2://u:{SECRET}@127.0.0.1:1/x",
        ["register", "a.b.c"],
        ["127.0.0.1:1"],
    ),
    "driver-missing": (f"postgresql+pg8000://u:{SECRET}@127.0.0.1:1/x", ["tables"], ["pip install pg8000"]),
    "mysql-driver-missing": (
        f"mysql://u:{SECRET}@127.0.0.1:1/x",
        ["processes"],
        ["pip install mysqlclient", "pymysql"],
    ),
    "malformed-url": ("notaurl", ["tables"], ["store URL 'notaurl' is not a database URL"]),
    "unwritable-proc": (
        "sqlite:////proc/nonexistent-tms/tm.db",
        ["db", "upgrade"],
        ["/proc/nonexistent-tms/tm.db", "cannot create"],
    ),
}


@pytest.mark.parametrize("case", list(STORE_CASES))
def test_store_problems_are_one_clear_line(case: str) -> None:
    url, command, expected = STORE_CASES[case]
    assert_clean_error(*tablemgmt("--store-url", url, *command)[::2], *expected)


def test_a_store_path_under_a_regular_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    db = tmp_path / "afile" / "sub" / "tm.db"
    code, _, err = tablemgmt("--store-url", f"sqlite:///{db}", "register", "a.b.c", "--warehouse", "/wh")
    assert_clean_error(code, err, str(db), "cannot create")


@pytest.mark.parametrize(
    "command",
    [
        ["tables"],
        ["show", "lake.db.orders"],
        ["processes"],
        ["process", "1"],
        ["catalogs"],
        ["remove", "lake.db.orders"],
    ],
    ids=lambda c: c[0],
)
def test_commands_that_only_read_or_remove_never_create_a_store(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "missing" / "tablemgmt.db"
    code, _, err = tablemgmt("--store-url", f"sqlite:///{db}", *command)
    assert_clean_error(code, err, f"no store at {db}", "tablemgmt db upgrade")
    assert not db.parent.exists()


def _bad_yaml(tmp_path: Path) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text("tables: [\n  {catalog: lake\n")
    return str(path)


INPUT_CASES = {
    # name: (command, expected parts of the message); {bad} is a file that is not YAML
    "apply-missing-file": (["apply", "/nonexistent/tables.yaml"], ["/nonexistent/tables.yaml"]),
    "apply-unparseable": (["apply", "{bad}"], ["bad.yaml"]),
    "apply-directory": (["apply", "/tmp"], ["/tmp"]),
    "register-missing-file": (["register", "--file", "/nonexistent/spec.yaml"], ["/nonexistent/spec.yaml"]),
    "register-unparseable": (["register", "--file", "{bad}"], ["bad.yaml"]),
    "bad-instant": (
        ["run", "lake.db.orders", "rewrite-files", "--instant", "notadate"],
        ["--instant", "'notadate'"],
    ),
    "unknown-table-show": (["show", "lake.db.nope"], ["table lake.db.nope is not registered"]),
    "unknown-table-run": (["run", "lake.db.nope", "rewrite-files"], ["table lake.db.nope is not registered"]),
    "unknown-table-clear": (["clear", "lake.db.nope"], ["table lake.db.nope is not registered"]),
    "unknown-catalog": (
        ["register", "nocat.db.t", "--action", "rewrite-files"],
        ["catalog 'nocat' is not registered", "lake"],
    ),
    "unknown-catalog-set-from-yaml": (["catalog", "set", "Bad-Name", "--warehouse", "/wh"], ["Bad-Name"]),
    "unknown-action-run": (["run", "lake.db.orders", "purge"], ["unknown action 'purge'", "rewrite-files"]),
    "filter-unknown-table": (
        ["processes", "--table", "lake.db.nope"],
        ["table lake.db.nope is not registered"],
    ),
    "filter-unknown-action": (
        ["processes", "--action", "nope"],
        ["unknown action 'nope'", "expire-snapshots"],
    ),
    "unknown-process": (["process", "999999"], ["no process with id 999999"]),
    "relative-warehouse": (
        ["catalog", "set", "other", "--warehouse", "../../tmp"],
        ["warehouse", "'../../tmp'", "absolute"],
    ),
}


@pytest.mark.parametrize("case", list(INPUT_CASES))
def test_bad_input_is_one_clear_line(populated: str, tmp_path: Path, case: str) -> None:
    command, expected = INPUT_CASES[case]
    command = [_bad_yaml(tmp_path) if part == "{bad}" else part for part in command]
    code, _, err = tablemgmt("--store-url", populated, *command)
    assert_clean_error(code, err, *expected)
