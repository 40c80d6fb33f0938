"""``tablemgmt jars``: the Spark artifacts of this host (list, fetch for offline workers and images)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from airflow_tablemgmt.cli.output import add_output_option, emit


def cmd_jars_fetch(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services.artifacts import fetch_jars, selected_needs

    needs = selected_needs(args.format or [], args.need or [], args.all)
    settings, resolved = fetch_jars(needs, directory=args.dir)
    total = sum(r.size for r in resolved)
    downloaded = [r for r in resolved if r.source == "downloaded"]
    if args.json:
        emit(
            [
                {
                    "need": r.need,
                    "coordinate": r.artifact.coordinate,
                    "path": str(r.path),
                    "source": r.source,
                    "bytes": r.size,
                }
                for r in resolved
            ],
            args,
        )
    else:
        for r in resolved:
            print(f"{r.source:<10} {r.artifact.coordinate:<60} {r.path}")
        print(
            f"{len(resolved)} jar(s), {total / 1e6:.1f} MB in {settings.directory} "
            f"({len(downloaded)} downloaded, {sum(r.seconds for r in downloaded):.1f} s)"
        )
    return 0


def cmd_jars_list(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services.artifacts import jar_status

    settings, rows = jar_status(args.dir)
    if args.json:
        emit([r.__dict__ for r in rows], args)
        return 0
    print(
        f"jar cache: {settings.directory}   repository: {settings.repository}"
        f"{'   (offline)' if settings.offline else ''}"
    )
    for r in rows:
        print(f"{r.need:<14} {r.state:<8} {r.coordinate:<60} {r.path}")
    return 0


def add_parser(sub: Any) -> None:
    from airflow_tablemgmt.spark.launch.artifacts import all_needs, format_needs

    jars = sub.add_parser("jars", help="Spark artifacts (Maven jars) cached on this host")
    jsub = jars.add_subparsers(dest="jars_command", required=True)
    fe = jsub.add_parser(
        "fetch",
        help="download and verify jars into the jar cache (for offline workers and images)",
        description="Without options: the Iceberg runtime. Needs: "
        + "; ".join(f"{n.name}: {n.description}" for n in all_needs().values()),
    )
    fe.add_argument(
        "--format", action="append", choices=sorted(format_needs()), help="a table format's runtime"
    )
    fe.add_argument(
        "--need", action="append", choices=list(all_needs()), help="one artifact need (repeatable)"
    )
    fe.add_argument("--all", action="store_true", help="every known artifact (≈ 650 MB)")
    fe.add_argument("--dir", type=Path, help="the jar cache (default: [tablemgmt] jars_dir)")
    add_output_option(fe)
    fe.set_defaults(func=cmd_jars_fetch)
    ls = jsub.add_parser("list", help="every known artifact and where a job would take it from")
    ls.add_argument("--dir", type=Path, help="the jar cache (default: [tablemgmt] jars_dir)")
    add_output_option(ls)
    ls.set_defaults(func=cmd_jars_list)
