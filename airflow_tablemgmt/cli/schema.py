"""``tablemgmt schema``: print the JSON Schema of ``tables.yaml`` for editors (docs/provider.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def cmd_schema(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.core.schema import declarations_json_schema

    text = json.dumps(declarations_json_schema(), indent=None if args.compact else 2) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote the JSON Schema of tables.yaml to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def add_parser(sub: Any) -> None:
    sc = sub.add_parser(
        "schema",
        help="print the JSON Schema of tables.yaml (for editors: '# yaml-language-server: $schema=<file>')",
    )
    sc.add_argument("--out", metavar="FILE", help="write it to FILE instead of stdout")
    sc.add_argument("--compact", action="store_true", help="one line instead of indented JSON")
    sc.set_defaults(func=cmd_schema)
