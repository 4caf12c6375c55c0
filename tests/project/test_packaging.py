"""What a release carries: the license text, a changelog entry and one version everywhere."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest
import yaml

from tests.deploy.deploy_helpers import DEPLOY, ROOT

pytestmark = pytest.mark.process

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_license_file_is_the_apache_2_0_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text
    assert len(text.splitlines()) > 190


def test_reactor_version_prints_the_package_version() -> None:
    done = subprocess.run([sys.executable, "-m", "reactor", "--version"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, f"reactor {VERSION}")


def test_the_changelog_has_the_version_and_the_chart_follows_it() -> None:
    assert f"## [{VERSION}]" in (ROOT / "CHANGELOG.md").read_text()
    for chart in ("gpu-reactor", "gpu-reactor-base"):
        meta = yaml.safe_load((DEPLOY / "helm" / chart / "Chart.yaml").read_text())
        assert meta["appVersion"] == VERSION
