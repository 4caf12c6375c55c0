"""Installing prints no setuptools deprecation warnings: the license is an SPDX expression (PEP 639)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

PYPROJECT = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())


def test_the_license_is_an_spdx_string_with_a_setuptools_that_reads_it() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    (setuptools,) = [r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    minimum = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", setuptools)
    assert minimum is not None and int(minimum[1]) >= 77  # the first release that takes `license` as a string


def test_the_installed_metadata_carries_the_license_expression() -> None:
    assert importlib.metadata.metadata("gpu-reactor")["License-Expression"] == "Apache-2.0"
