"""Session-wide end-to-end fixtures: one fake exporter, one webhook sink, one Prometheus + Alertmanager.

The pipeline needs ~5 s after start before it delivers (target and Alertmanager discovery), so
it is started once per session. Missing binaries skip, or fail under PROMSTACK_REQUIRED=1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.promstack.exporter import FakeDcgmExporter
from tests.promstack.stack import PromStack, WebhookSink, binaries, promstack

WEBHOOK_TOKEN = "promstack-test-token"


@pytest.fixture(scope="session")
def promstack_binaries() -> dict[str, str]:
    return binaries()


@pytest.fixture(scope="session")
def dcgm_exporter() -> Iterator[FakeDcgmExporter]:
    with FakeDcgmExporter(gpus=8, hostname="gpu-node-1") as exporter:
        yield exporter


@pytest.fixture(scope="session")
def webhook_sink() -> Iterator[WebhookSink]:
    sink = WebhookSink().start()
    try:
        yield sink
    finally:
        sink.stop()


@pytest.fixture(scope="session")
def webhook_token_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("token") / "token"
    path.write_text(WEBHOOK_TOKEN + "\n")
    return path


@pytest.fixture(scope="session")
def stack(
    promstack_binaries: dict[str, str],
    dcgm_exporter: FakeDcgmExporter,
    webhook_sink: WebhookSink,
    webhook_token_file: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[PromStack]:
    with promstack(
        tmp_path_factory.mktemp("promstack"),
        exporter=dcgm_exporter.address,
        webhook_url=webhook_sink.url,
        token_file=webhook_token_file,
        **promstack_binaries,
    ) as running:
        yield running
