"""A client that refuses the embedded cluster's CA is a normal event: logged at debug, never a traceback."""

from __future__ import annotations

import logging
import ssl
import time
import urllib.error
import urllib.request

import pytest

from reactor_sim import SimCluster


def test_a_client_refusing_the_ca_leaves_no_traceback_and_the_server_keeps_serving(
        capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="reactor_sim.server")
    with SimCluster().start(tls=True) as sim:
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(f"{sim.url}/version", timeout=5, context=ssl.create_default_context())
        deadline = time.monotonic() + 5
        while not any("TLS handshake failed" in r.message for r in caplog.records) and time.monotonic() < deadline:
            time.sleep(0.05)
        trusted = ssl.create_default_context(cafile=sim.ca_file)
        with urllib.request.urlopen(f"{sim.url}/version", timeout=5, context=trusted) as answer:
            assert answer.status == 200
    assert [r.levelno for r in caplog.records if r.message == "TLS handshake failed"] == [logging.DEBUG]
    assert "Traceback" not in capfd.readouterr().err
