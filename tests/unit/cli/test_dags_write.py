"""``tablemgmt dags write``: the DAG file ships in the package and lands in the dags folder as the source
tree has it; a user's different file is kept unless asked."""

from __future__ import annotations

from pathlib import Path

from airflow_tablemgmt.cli.dags import DAG_FILE, FILE_NAME
from airflow_tablemgmt.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[3]


def _run(*argv: str) -> int:
    args = build_parser().parse_args(list(argv))
    return int(args.func(args))


def test_the_shipped_dag_file_is_the_source_trees() -> None:
    assert (ROOT / "dags" / FILE_NAME).read_text() == DAG_FILE


def test_write_creates_the_folder_and_the_file(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "airflow" / "dags"
    assert _run("dags", "write", str(folder)) == 0
    assert (folder / FILE_NAME).read_text() == DAG_FILE
    assert "tables.yaml" in capsys.readouterr().err  # where to declare tables next
    assert _run("dags", "write", str(folder)) == 0  # again: identical, left alone
    assert "already up to date" in capsys.readouterr().err


def test_a_different_file_is_kept_unless_forced(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    mine = tmp_path / FILE_NAME
    mine.write_text("# my own\n")
    assert _run("dags", "write", str(tmp_path)) == 1
    assert "--force" in capsys.readouterr().err
    assert mine.read_text() == "# my own\n"
    assert _run("dags", "write", str(tmp_path), "--force") == 0
    assert mine.read_text() == DAG_FILE
