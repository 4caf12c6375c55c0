"""The README is a front page, and what it shows of the demo is what the demo prints.

The front page stays short enough to read (the rest lives under docs/), opens with a table of contents, and reaches
the cluster install within its first screens. Its demo table is the demo's own output, row for row: a pasted table
drifts the moment the demo changes (row 2 once named a pod where the demo prints the Deployment).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest
import yaml

from tests.docs.pages import ROOT, blocks, prose

README = ROOT / "README.md"
MAX_LINES = 300


def _headings() -> list[tuple[int, str]]:
    return [(n, line) for n, line in prose(README) if line.startswith("#")]


def test_the_front_page_is_short_and_opens_with_its_contents() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES
    assert [h for _, h in _headings()][:3] == ["# GPU Reactor", "## Contents", "## Quick start"]


def test_the_cluster_install_comes_within_the_first_screens() -> None:
    (line,) = [n for n, h in _headings() if h == "## Install on a cluster"]
    assert line < 160
    install = [h for n, h in _headings() if n > line]
    assert install[:2] == ["### 1. The image", "### 2. Helm"] and "### 3. Kustomize" in install


def test_the_front_page_links_into_every_page_under_docs() -> None:
    text = README.read_text()
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"(docs/{p.name}" not in text]
    assert missing == []


def _cells(row: str) -> list[str]:
    """A row's columns, its timing (`grown 0.4s later`) made timeless: the donor's rollout takes what it takes."""
    return re.split(r"\s{2,}", re.sub(r"\d+(\.\d+)?s later", "Ns later", row.strip()))


def _step_table() -> list[str]:
    (table,) = [b for b in blocks(README) if b.language == "" and b.text.startswith("#   step")]
    return [line for line in table.text.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_demo_table_is_what_the_demo_prints() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REACTOR_") and k != "KUBERNETES_SERVICE_HOST"}
    done = subprocess.run([sys.executable, "-m", "reactor", "demo", "--once"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**env, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout.splitlines()
    start = next(i for i, line in enumerate(printed) if line.startswith("#   step"))
    end = next(i for i in range(start, len(printed)) if printed[i].startswith("After:"))
    shown = [_cells(r) for r in printed[start:end] if r.strip()]
    assert [_cells(r) for r in _step_table()] == shown, "\n".join(printed[start:end])
    # The seed the prose describes: five workloads holding all 10 GPUs of the quota.
    before = printed[printed.index(next(line for line in printed if line.startswith("Before:"))):start]
    assert "used 10 of 10" in before[0]
    assert len([line for line in before if line.startswith(("Deployment/", "StatefulSet/"))]) == 5


def test_the_demo_cluster_is_the_one_the_front_page_describes() -> None:
    """The seed's figures the quick start states: a quota of 10 GPUs, 1–4 per container, three PriorityClasses, two
    Ready 8-GPU nodes; the rebalancing step's one quota of 8 on a third 8-GPU node; `verify.interval` 1s."""
    from reactor.tools import demo

    data = ROOT / "reactor" / "tools" / "demo_data"
    cluster = [d for d in yaml.safe_load_all((data / "cluster.yaml").read_text()) if d]
    shared = [d for d in yaml.safe_load_all((data / "rebalance.yaml").read_text()) if d]

    def of(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
        return [d for d in docs if d["kind"] == kind]

    (quota,) = [q for q in of(cluster, "ResourceQuota") if q["metadata"]["namespace"] == "ml-workloads"]
    (limits,) = [r for r in of(cluster, "LimitRange") if r["metadata"]["namespace"] == "ml-workloads"]
    (item,) = limits["spec"]["limits"]
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "10"
    assert (item["min"]["nvidia.com/gpu"], item["max"]["nvidia.com/gpu"]) == ("1", "4")
    assert len(of(cluster, "PriorityClass")) == 3
    assert [n["status"]["allocatable"]["nvidia.com/gpu"] for n in of(cluster, "Node")] == ["8", "8"]
    assert [n["status"]["allocatable"]["nvidia.com/gpu"] for n in of(shared, "Node")] == ["8"]
    assert [q["spec"]["hard"]["requests.nvidia.com/gpu"] for q in of(shared, "ResourceQuota")] == ["8"]
    assert demo.VERIFY_INTERVAL == "1s"
    text = README.read_text()
    for stated in ("a quota of 10 GPUs, 1–4 GPUs per container, three", "two Ready 8-GPU nodes", "third 8-GPU node",
                   "(1s in the demo)"):
        assert stated in " ".join(text.split()), stated
