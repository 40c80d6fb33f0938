"""A task start's parse of the DAG file (the single-DAG parse), this tree against another, interleaved.

``dag_parse.py`` measures every kind of parse of one tree; on a busy machine two of its runs, one per tree,
see different loads. This runs only the single-DAG parses, alternating between the two trees' packages on
the same store, so both see the same load:

* the planned DAG ``tms__plan__fleet__rewrite-files`` (its ``plan`` task), ``--enrolled`` tables enrolled by one
  policy (rows written as ``dag_parse.py --source enrolled`` writes them);
* a table's own DAG (its ``maintain`` task), one of ``--tables`` tables registered in the store.

Each parse: Airflow's ``DagBag`` over the shipped ``dags/tablemgmt_dags.py`` in a fresh process, the package
byte-compiled first, Airflow imported before the clock (``dag_parse.py``'s child). Printed per tree and DAG:
median and minimum CPU of the parsing process and wall clock over ``--repeat`` parses, and ``uptime``.

    git archive <commit> airflow_tablemgmt dags | tar -x -C /tmp/before
    .venv/bin/python benchmarks/single_parse_ab.py --against /tmp/before [--repeat 8] [--enrolled 1000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dag_parse  # noqa: E402 - the benchmark beside this one: its child, population and uptime

ROOT = Path(__file__).resolve().parents[1]
TABLE_DAG = "tms__lake.bench.t{i:05d}__rewrite-files"


def compiled_copy(tree: Path, into: Path) -> Path:
    """``tree``'s package, byte-compiled as ``make install`` leaves it."""
    shutil.copytree(
        tree / "airflow_tablemgmt", into / "airflow_tablemgmt", ignore=shutil.ignore_patterns("__pycache__")
    )
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into / "airflow_tablemgmt")], check=True)
    return into


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--against", type=Path, required=True, help="another tree (its airflow_tablemgmt/)")
    p.add_argument("--repeat", type=int, default=8)
    p.add_argument("--enrolled", type=int, default=1000, help="tables the policy enrolled")
    p.add_argument("--tables", type=int, default=200, help="tables registered in the store")
    args = p.parse_args()
    started = dag_parse.uptime()
    tmp = Path(tempfile.mkdtemp(prefix="tms-bench-single-"))
    try:
        trees = {
            "this tree": compiled_copy(ROOT, tmp / "this"),
            f"--against {args.against}": compiled_copy(args.against, tmp / "against"),
        }
        dags = tmp / "dags"
        dags.mkdir()
        shutil.copy(ROOT / "dags" / "tablemgmt_dags.py", dags)
        url = f"sqlite:///{tmp / 'tablemgmt.db'}"
        dag_parse.populate_enrolled(url, range(args.enrolled))
        dag_parse.populate(url, range(args.enrolled, args.enrolled + args.tables))
        env = dag_parse.parse_env(tmp, url)

        def with_tree(path: Path, extra: dict[str, str]) -> dict[str, str]:
            return {
                **env,
                **extra,
                "PYTHONPATH": os.pathsep.join([str(path), *filter(None, [env.get("PYTHONPATH")])]),
            }

        dag_parse.child(dags, with_tree(trees["this tree"], {}), "parse")  # the full parse: the store in sync
        table_dag = TABLE_DAG.format(i=args.enrolled + args.tables // 2)
        cases = {
            "planned DAG": {
                "_AIRFLOW_PARSING_CONTEXT_DAG_ID": dag_parse.PLAN_DAG,
                "_AIRFLOW_PARSING_CONTEXT_TASK_ID": "plan",
            },
            "a table's DAG": {
                "_AIRFLOW_PARSING_CONTEXT_DAG_ID": table_dag,
                "_AIRFLOW_PARSING_CONTEXT_TASK_ID": "maintain",
            },
        }
        runs: dict[tuple[str, str], list[dict[str, object]]] = {}
        for case, extra in cases.items():
            for _ in range(args.repeat):
                for tree, path in trees.items():
                    run = dag_parse.child(dags, with_tree(path, extra), "parse")
                    if run["dags"] != 1 or not str(run["package"]).startswith(str(path)):
                        raise SystemExit(f"{tree}, {case}: built {run['dags']} DAG(s) from {run['package']}")
                    runs.setdefault((case, tree), []).append(run)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"uptime at the start: {started}\nuptime at the end:   {dag_parse.uptime()}\n")
    print(
        f"{args.enrolled} enrolled tables (one policy), {args.tables} store tables; {args.repeat} parses each, interleaved\n"
    )
    print("| DAG | tree | CPU median (s) | CPU min (s) | wall median (s) | wall min (s) |")
    print("|---|---|---:|---:|---:|---:|")
    for (case, tree), rs in runs.items():
        cpu = [float(r["parse_cpu_s"]) for r in rs]  # type: ignore[arg-type]
        wall = [float(r["parse_s"]) for r in rs]  # type: ignore[arg-type]
        print(
            f"| {case} | {tree} | {statistics.median(cpu):.3f} | {min(cpu):.3f} | "
            f"{statistics.median(wall):.3f} | {min(wall):.3f} |"
        )


if __name__ == "__main__":
    main()
