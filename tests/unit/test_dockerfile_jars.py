"""The image's ``tablemgmt jars fetch`` line is a valid command (Docker itself cannot run here)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from airflow_tablemgmt.cli import build_parser
from airflow_tablemgmt.services.artifacts import selected_needs

DOCKERFILE = Path(__file__).resolve().parents[2] / "docker" / "Dockerfile"


def test_the_image_fetches_its_jars_with_a_valid_command() -> None:
    [line] = re.findall(r"^RUN (tablemgmt jars fetch .*)$", DOCKERFILE.read_text(), flags=re.M)
    argv = shlex.split(line)[1:]
    args = build_parser().parse_args(argv)
    assert args.func.__name__ == "cmd_jars_fetch"
    assert selected_needs(args.format or [], args.need or [], args.all) == ["iceberg", "aws", "postgresql"]
    assert "ENV AIRFLOW__TABLEMGMT__JARS_DIR=" in DOCKERFILE.read_text()
