"""The CLI's one output layer: ``--output table|json|yaml`` on every command that prints data, as in
Airflow's own CLI; ``--json`` stays as the short form of ``--output json``.

``table`` is the human form (aligned columns for a listing, YAML for one object); ``json`` and ``yaml``
are the same document, for scripts. :func:`resolve` runs once after parsing and leaves ``args.output``
set and ``args.json`` true whenever a document (json or yaml) was asked for, so a command has one branch
for "a document" and one for "a person". :class:`Output` is that choice as one object: a command hands
it the document and, for a person, the columns; it never tests the format itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
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


def columns(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """Aligned columns under a header: the ``table`` form of a listing."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*map(str, r)) for r in [header, *rows])


class Output:
    """Where a command's answer goes, in the format the command line asked for."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    @property
    def document(self) -> bool:
        """True when a script asked for a document (json or yaml)."""
        return bool(getattr(self.args, "json", False))

    def one(self, data: Any) -> None:
        """One object: the document, or YAML for a person."""
        emit(data, self.args)

    def listing(self, data: Any, rows: Sequence[Sequence[Any]], header: Sequence[str]) -> None:
        """A list: ``data`` as the document, else ``rows`` under ``header`` (nothing for no rows only
        when ``header`` is empty)."""
        if self.document:
            emit(data, self.args)
        else:
            print(columns(rows, header))

    def note(self, text: str) -> None:
        """A line for a person: on stdout, or stderr when stdout carries a document."""
        print(text, file=sys.stderr if self.document else sys.stdout)
