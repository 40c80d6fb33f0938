"""``tablemgmt dags write <folder>``: put the DAG file into Airflow's dags folder.

The file is a few lines that hand the folder's ``tables.yaml`` and the store's registered tables to
:func:`airflow_tablemgmt.dag_file.register_dags`; it ships inside the package (this module) so a
``pip install`` is all a deployment needs. ``dags/tablemgmt_dags.py`` in the source tree is the same text
(tests/unit/cli/test_dags_write.py checks it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

FILE_NAME = "tablemgmt_dags.py"

DAG_FILE = '''"""airflow-tablemgmt: one maintenance DAG per (registered table, enabled action).

Tables come from tables.yaml beside this file and from `tablemgmt register` / the REST API.
"""

from pathlib import Path

from airflow_tablemgmt.dag_file import register_dags

register_dags(globals(), tables_yaml=Path(__file__).with_name("tables.yaml"))
'''


def write_dag_file(folder: Path, *, force: bool = False) -> tuple[Path, bool]:
    """Write the DAG file into ``folder`` (created if missing). Returns (path, whether it was written):
    an identical file is left alone; a different one is kept unless ``force``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE_NAME
    if path.exists():
        current = path.read_text(encoding="utf-8")
        if current == DAG_FILE:
            return path, False
        if not force:
            raise FileExistsError(
                f"{path} exists and differs from the provider's DAG file; pass --force to replace it"
            )
    tmp = path.with_name(f".{FILE_NAME}.tmp")
    tmp.write_text(DAG_FILE, encoding="utf-8")
    tmp.replace(path)  # the dag-processor never parses a half-written file
    return path, True


def cmd_dags_write(args: argparse.Namespace) -> int:
    try:
        path, written = write_dag_file(Path(args.folder).expanduser(), force=args.force)
    except (FileExistsError, OSError) as e:
        print(f"tablemgmt dags write: {e}", file=sys.stderr)
        return 1
    tables = path.with_name("tables.yaml")
    state = "wrote" if written else "already up to date:"
    hint = "" if tables.exists() else f"; declare tables in {tables} (docs/declaring-tables.md)"
    print(f"{state} {path}{hint}", file=sys.stderr)
    return 0


def add_parser(sub: Any) -> None:
    dg = sub.add_parser("dags", help="the DAG file Airflow's dags folder needs")
    dsub = dg.add_subparsers(dest="dags_command", required=True)
    wr = dsub.add_parser(
        "write", help=f"write {FILE_NAME} (reads tables.yaml beside it) into FOLDER, your dags folder"
    )
    wr.add_argument("folder", metavar="FOLDER", help="Airflow's dags folder ([core] dags_folder)")
    wr.add_argument("--force", action="store_true", help="replace a different existing file")
    wr.set_defaults(func=cmd_dags_write)
