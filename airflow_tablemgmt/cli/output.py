"""The CLI's one output layer: ``--output table|json|yaml`` on every command that prints data, as in
Airflow's own CLI; ``--json`` stays as the short form of ``--output json``.

``table`` is the human form (aligned columns for a listing, YAML for one object); ``json`` and ``yaml``
are the same document, for scripts. :func:`resolve` runs once after parsing and leaves ``args.output``
set and ``args.json`` true whenever a document (json or yaml) was asked for, so a command has one branch
for "a document" and one for "a person".
"""

from __future__ import annotations

import argparse
import json
from typing import Any

FORMATS = ("table", "json", "yaml")


def add_output_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=FORMATS, default=None, help="table (default), json or yaml")
    parser.add_argument("--json", action="store_true", help="the same as --output json")


def resolve(args: argparse.Namespace) -> None:
    if not hasattr(args, "output"):
        return
    if args.output is None:
        args.output = "json" if getattr(args, "json", False) else "table"
    args.json = args.output != "table"


def render(data: Any, fmt: str) -> str:
    """``data`` as JSON, or YAML (also the ``table`` form of a single object)."""
    if fmt == "json":
        return json.dumps(data, indent=2, default=str)
    import yaml  # only for this output: a run's start-up does not pay for it

    # Through JSON first: datetimes, enums and tuples become what the JSON form shows.
    plain = json.loads(json.dumps(data, default=str))
    return yaml.safe_dump(plain, sort_keys=False, default_flow_style=False).rstrip()


def emit(data: Any, args: argparse.Namespace) -> None:
    print(render(data, getattr(args, "output", None) or ("json" if getattr(args, "json", False) else "yaml")))
