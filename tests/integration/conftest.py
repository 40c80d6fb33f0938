"""What the integration suites share: SeaweedFS's S3 gateway, one per test module that asks for ``s3``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.iceberg_session import skip_unless_ci
from tests.support.servers import SeaweedS3


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    try:
        server = SeaweedS3(tmp_path_factory.mktemp("seaweed")).start()
    except RuntimeError as e:
        skip_unless_ci(f"SeaweedFS could not start: {e}")
    yield server
    server.stop()
