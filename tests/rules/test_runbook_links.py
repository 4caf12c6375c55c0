"""Runbook links: `runbookUrl: auto` finds where the checkout is hosted, and every link lands on a heading.

The remote forms are the ones git accepts; the checkouts are real git repositories in temporary folders.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import MappingProxyType

import pytest
import yaml

from reactor.core.model import KNOWN_ALERTS, TEST_ALERT
from reactor.tools.rules import RULES_FILE, render_command
from reactor.tools.rules.checkout import CheckoutFacts, read_checkout, resolve
from reactor.tools.rules.hosting import anchors, heading_anchor, repository
from tests.helm.charts import CHART, by_key, render
from tests.rules.conftest import REPO, RULE_TESTS_DIR
from tests.rules.rule_files import alert_rules

SHA = "0123456789abcdef0123456789abcdef01234567"
RUNBOOKS = REPO / "docs" / "runbooks.md"


@pytest.mark.parametrize(("remote", "tag", "url"), [
    ("https://github.com/acme/gpu-reactor.git", None, f"https://github.com/acme/gpu-reactor/blob/{SHA}/docs/runbooks.md"),
    ("https://github.com/acme/gpu-reactor", "v0.2.0", "https://github.com/acme/gpu-reactor/blob/v0.2.0/docs/runbooks.md"),
    ("git@github.com:acme/gpu-reactor.git", None, f"https://github.com/acme/gpu-reactor/blob/{SHA}/docs/runbooks.md"),
    ("ssh://git@github.com/acme/gpu-reactor.git", None,
     f"https://github.com/acme/gpu-reactor/blob/{SHA}/docs/runbooks.md"),
    ("ssh://git@ssh.github.com:443/acme/gpu-reactor.git", None,
     f"https://github.com/acme/gpu-reactor/blob/{SHA}/docs/runbooks.md"),
    ("https://bot:ghp_secret@github.com/acme/gpu-reactor.git/", None,
     f"https://github.com/acme/gpu-reactor/blob/{SHA}/docs/runbooks.md"),
    ("https://gitlab.com/ml/platform/gpu-reactor.git", "v1.0.0",
     "https://gitlab.com/ml/platform/gpu-reactor/-/blob/v1.0.0/docs/runbooks.md"),
    ("git@gitlab.corp.example:ml/gpu-reactor.git", None,
     f"https://gitlab.corp.example/ml/gpu-reactor/-/blob/{SHA}/docs/runbooks.md"),
    ("https://codeberg.org/acme/gpu-reactor.git", None,
     f"https://codeberg.org/acme/gpu-reactor/src/commit/{SHA}/docs/runbooks.md"),
    ("ssh://git@gitea.corp.example:2222/acme/gpu-reactor.git", "v0.2.0",
     "https://gitea.corp.example/acme/gpu-reactor/src/tag/v0.2.0/docs/runbooks.md"),
    ("git://git.example.com/acme/gpu-reactor.git", None,
     f"https://git.example.com/acme/gpu-reactor/blob/{SHA}/docs/runbooks.md"),
    ("https://git.example.com:8443/acme/gpu-reactor.git", None,
     f"https://git.example.com:8443/acme/gpu-reactor/blob/{SHA}/docs/runbooks.md"),
], ids=["github-https", "github-tag", "github-scp", "github-ssh", "github-ssh-443", "credentials-dropped",
        "gitlab-subgroup-tag", "gitlab-selfhosted-scp", "codeberg", "gitea-ssh-port-tag", "git-protocol",
        "unknown-host-port"])
def test_a_remote_becomes_the_forges_file_url(remote: str, tag: str | None, url: str) -> None:
    base = resolve(CheckoutFacts(remote=remote, tag=tag, commit=SHA))
    assert base is not None and base.url == url
    assert "secret" not in base.url and "secret" not in base.origin
    assert ("not a known forge" in base.origin) == ("example.com" in remote)


@pytest.mark.parametrize("remote", [
    "/srv/git/gpu-reactor.git", "file:///srv/git/gpu-reactor.git", "../gpu-reactor", "github.com:gpu-reactor",
    "https://github.com/", "ftp://github.com/acme/gpu-reactor", "git@github.com:../../etc/passwd",
])
def test_a_remote_that_is_no_forge_page_is_not_guessed(remote: str) -> None:
    assert repository(remote) is None


def test_without_a_remote_pyprojects_repository_url_is_used() -> None:
    urls = MappingProxyType({"Homepage": "https://gpu-reactor.example.org",
                             "Source Code": "https://github.com/acme/gpu-reactor"})
    base = resolve(CheckoutFacts(remote="/srv/git/mirror.git", commit=SHA, project_urls=urls))
    assert base is not None
    assert base.url == f"https://github.com/acme/gpu-reactor/blob/{SHA}/docs/runbooks.md"
    assert base.origin.startswith("pyproject.toml [project.urls] sourcecode")
    # Outside git (an unpacked sdist): the version's tag.
    outside = resolve(CheckoutFacts(project_urls=urls, version="0.3.1"))
    assert outside is not None and outside.url.endswith("/blob/v0.3.1/docs/runbooks.md")


def test_nothing_known_resolves_to_nothing() -> None:
    assert resolve(CheckoutFacts(commit=SHA)) is None
    assert resolve(CheckoutFacts(remote="https://github.com/acme/gpu-reactor")) is None  # no ref at all
    assert resolve(CheckoutFacts(commit=SHA, project_urls=MappingProxyType({"Documentation": "https://x.example/d"}))) \
        is None


# --- real checkouts -------------------------------------------------------------------------------------------

def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com",
                           "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", *args],
                          capture_output=True, text=True, check=True, timeout=30)
    return done.stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git repository holding the rule tests' values with `runbookUrl: auto`, one commit, no remote."""
    values = tmp_path / "rules" / "thresholds.yaml"
    values.parent.mkdir()
    text = (RULE_TESTS_DIR / "thresholds.yaml").read_text(encoding="utf-8")
    values.write_text(text.replace("runbookUrl: https://github.com/gpu-reactor/gpu-reactor/blob/main/docs/runbooks.md",
                                   "runbookUrl: auto"), encoding="utf-8")
    assert "runbookUrl: auto" in values.read_text(encoding="utf-8")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "values")
    return tmp_path


def _links(root: Path) -> set[str]:
    return {r["annotations"]["runbook_url"] for r in alert_rules(root / RULES_FILE)}


def test_auto_links_to_the_origin_remote_at_the_commit_then_the_tag(
        checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _git(checkout, "remote", "add", "origin", "git@github.com:acme/gpu-reactor.git")
    commit = _git(checkout, "rev-parse", "HEAD")
    assert render_command(["render", "--root", str(checkout)]) == 0
    base = f"https://github.com/acme/gpu-reactor/blob/{commit}/docs/runbooks.md"
    assert _links(checkout) == {f"{base}#{a.lower()}" for a in KNOWN_ALERTS}
    assert f"runbook links: {base}#<alert> (git remote origin https://github.com/acme/gpu-reactor at commit" \
        in capsys.readouterr().out
    # Committing the render moves HEAD: the check still passes (where the links point is not a value).
    _git(checkout, "add", ".")
    _git(checkout, "commit", "-qm", "render")
    assert render_command(["render", "--check", "--root", str(checkout)]) == 0
    _git(checkout, "tag", "v0.2.0")
    assert render_command(["render", "--root", str(checkout)]) == 0
    assert all("/blob/v0.2.0/docs/runbooks.md#" in link for link in _links(checkout))


def test_auto_without_remote_or_urls_asks_for_the_setting(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert read_checkout(checkout).remote is None
    assert render_command(["render", "--root", str(checkout)]) == 2
    err = capsys.readouterr().err
    assert "runbookUrl: auto could not tell where this project is hosted" in err
    assert "set runbookUrl in the values file" in err
    assert not (checkout / RULES_FILE).exists()


def test_auto_without_remote_keeps_the_committed_links_and_warns(
        checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (checkout / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0.1.0"\n[project.urls]\n'
                                             'Repository = "https://gitlab.com/ml/gpu-reactor"\n')
    assert render_command(["render", "--root", str(checkout)]) == 0
    (checkout / "pyproject.toml").unlink()
    capsys.readouterr()
    assert render_command(["render", "--root", str(checkout)]) == 0
    out = capsys.readouterr()
    assert "warning: runbookUrl: auto could not tell" in out.err
    commit = _git(checkout, "rev-parse", "HEAD")
    assert all(link.startswith(f"https://gitlab.com/ml/gpu-reactor/-/blob/{commit}/docs/runbooks.md#")
               for link in _links(checkout))


def test_an_explicit_url_is_checked_strictly(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = checkout / "rules" / "thresholds.yaml"
    values.write_text(values.read_text().replace("runbookUrl: auto", "runbookUrl: https://wiki.example/runbooks.md"))
    assert render_command(["render", "--root", str(checkout)]) == 0
    values.write_text(values.read_text().replace("https://wiki.example/", "https://docs.example/"))
    assert render_command(["render", "--check", "--root", str(checkout)]) == 1
    assert "+      runbook_url: https://docs.example/runbooks.md#gpuidle" in capsys.readouterr().out


# --- every link lands on a heading ---------------------------------------------------------------------------

@pytest.mark.parametrize(("heading", "anchor"), [
    ("GPUUnderutilized", "gpuunderutilized"),
    ("What it means — and what to do!", "what-it-means--and-what-to-do"),
    ("`reactor doctor` checks", "reactor-doctor-checks"),
    ("[Alertmanager](https://prometheus.io) routing", "alertmanager-routing"),
    ("snake_case and 2 GPUs", "snake_case-and-2-gpus"),
])
def test_heading_anchors_follow_githubs_rule(heading: str, anchor: str) -> None:
    assert heading_anchor(heading) == anchor


def test_repeated_headings_are_numbered_and_fenced_code_is_no_heading() -> None:
    doc = "# A\n## Checks\n```\n# not a heading\n```\n## Checks\n### Checks ###\n"
    assert anchors(doc) == ["a", "checks", "checks-1", "checks-2"]


def _rule_links() -> dict[str, list[str]]:
    rendered = by_key(render({"prometheusRule": {"enabled": True}}))[("PrometheusRule", "gpu-reactor", "gpu-reactor")]
    sources = {
        "rules/gpu-reactor.rules.yaml": alert_rules(REPO / RULES_FILE),
        "deploy/prometheus": [r for g in yaml.safe_load(
            (REPO / "deploy/prometheus/gpu-reactor-prometheusrule.yaml").read_text())["spec"]["groups"]
            for r in g["rules"] if "alert" in r],
        "chart": [r for g in rendered["spec"]["groups"] for r in g["rules"] if "alert" in r],
        "rule tests": alert_rules(_render_test_values()),
    }
    return {name: [r["annotations"]["runbook_url"] for r in rules] for name, rules in sources.items()}


def _render_test_values() -> Path:
    import tempfile

    from reactor.tools.rules import render_to

    return render_to(RULE_TESTS_DIR / "thresholds.yaml", tempfile.mkdtemp(prefix="runbooks-"))


def test_every_rendered_runbook_link_lands_on_a_heading_of_docs_runbooks() -> None:
    have = set(anchors(RUNBOOKS.read_text(encoding="utf-8")))
    links = _rule_links()
    assert all(links.values()), links
    for source, urls in links.items():
        for url in urls:
            base, _, anchor = url.partition("#")
            assert base.endswith("/docs/runbooks.md"), (source, url)
            assert anchor in have, f"{source}: {url}: no heading #{anchor} in docs/runbooks.md"


def test_every_alert_the_reactor_knows_has_its_runbook_section() -> None:
    """Each section says what the alert means, what the reactor does (`Reactor:`) and what to check."""
    text = RUNBOOKS.read_text(encoding="utf-8")
    sections = {s.split("\n", 1)[0].strip(): s for s in text.split("\n## ")[1:]}
    for alert in [*KNOWN_ALERTS, TEST_ALERT]:
        assert alert in sections, f"docs/runbooks.md lacks ## {alert}"
        assert "- Reactor:" in sections[alert] and sections[alert].count("\n- ") >= 2, alert


def test_the_charts_runbook_default_is_auto_and_keeps_the_rendered_links() -> None:
    assert yaml.safe_load((CHART / "values.yaml").read_text())["prometheusRule"]["runbookUrl"] == "auto"
    links = _rule_links()
    assert links["chart"] == links["rules/gpu-reactor.rules.yaml"]


@pytest.mark.parametrize("url", ["docs/runbooks.md", "https://x.example/runbooks.md#gpuidle", "Auto"])
def test_a_runbook_url_is_auto_or_an_http_url_without_anchor(url: str) -> None:
    from reactor.core.errors import ConfigError
    from reactor.tools.rules.values import build_values

    assert build_values({"runbookUrl": "auto"}).runbook_url == "auto"
    with pytest.raises(ConfigError, match="runbookUrl: expected `auto` or an http"):
        build_values({"runbookUrl": url})
    import helm_python

    with pytest.raises(helm_python.HelmError, match="runbookUrl"):
        render({"prometheusRule": {"enabled": True, "runbookUrl": url}})
