"""The HTML report in a real headless browser (Debian's chromium): it renders its plots offline, with no console
error; and the command line writes each output from the real Prometheus."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from reactor.app.cli import main
from reactor.tools.report import render_html, render_json
from reactor.tools.report.model import Report
from tests.report import browser, history
from tests.report.conftest import History


def _inked(shot: Path, colour: tuple[float, float, float]) -> int:
    """Pixels of about `colour` (RGB 0-1) in the screenshot."""
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))[:, :, :3]
    near = abs(pixels - colour).max(axis=2) < 0.08
    return int(near.sum())


def test_the_page_renders_its_plots_offline_without_console_errors(report: Report, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    text = render_html.render(report)
    page.write_text(text, encoding="utf-8")
    assert "<script" not in text and not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    assert text.count("<svg") == len(report.workloads)
    capped = render_html.render(report, plots=2)
    assert capped.count("<svg") == 2 and "Plots of the first 2 workloads of the table, of 8" in capped
    shot = tmp_path / "report.png"
    assert browser.load(page, shot).errors == []
    # The utilization lines (matplotlib's tab:blue) and the would-be actions (tab:red) were drawn.
    assert _inked(shot, (0x1F / 255, 0x77 / 255, 0xB4 / 255)) > 500
    assert _inked(shot, (0xD6 / 255, 0x27 / 255, 0x28 / 255)) > 50


def test_the_console_check_sees_an_error(tmp_path: Path) -> None:
    """The check above can fail: a page that logs an error and fetches a script from the network is caught."""
    page = tmp_path / "bad.html"
    page.write_text('<html><body><script>console.error("broken plot")</script>'
                    '<script src="https://cdn.example.com/plot.js"></script></body></html>', encoding="utf-8")
    errors = browser.load(page, tmp_path / "bad.png").errors
    assert "broken plot" in errors and any("cdn.example.com" in e or "ERR_NAME_NOT_RESOLVED" in e for e in errors)


def test_the_command_writes_each_output(served: History, tmp_path: Path) -> None:
    common = ["report", "--prometheus-url", served.url, "--config", str(served.policy), "--since", "4h",
              "--until", history.END.isoformat(), "--step", "1m", "--namespace", history.NAMESPACE]
    out = tmp_path / "report.json"
    assert main([*common, "--output", "json", "--out", str(out)]) == 0
    document = json.loads(out.read_text(encoding="utf-8"))
    jsonschema.validate(document, render_json.schema())
    assert document["summary"]["gpuHoursReleased"] == 10.5
    html = tmp_path / "report.html"
    assert main([*common, "--output", "html", "--out", str(html)]) == 0
    assert html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    text = tmp_path / "report.txt"
    assert main([*common, "--out", str(text)]) == 0
    lines = text.read_text(encoding="utf-8").splitlines()
    table = [line.split()[0] for line in lines[3:10]]
    assert table[:2] == ["ml/Deployment/under", "ml/Deployment/idle"]  # most GPU-hours recoverable first


def test_prometheus_not_answering_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reactor.tools.launcher import free_port

    url = f"http://127.0.0.1:{free_port()}"
    assert main(["report", "--prometheus-url", url, "--since", "1h", "--timeout", "2s"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("reactor report: Prometheus did not answer:") and err.count("\n") == 1


@pytest.mark.parametrize(("flags", "named"), [
    (["--since", "soon"], "--since"),
    (["--step", "0s"], "--step"),
    (["--until", "yesterday"], "--until"),
    (["--values", "no/such/thresholds.yaml"], "--values"),
])
def test_bad_flags_exit_2_naming_the_flag(flags: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--prometheus-url", "http://127.0.0.1:9", *flags]) == 2
    assert named in capsys.readouterr().err
