"""`runbookUrl: auto`: docs/runbooks.md of the repository this checkout came from, at its tag or commit.

`read_checkout` is the only function here that runs git or reads pyproject.toml; `resolve` decides from what
it found: the `origin` remote first, then pyproject's `[project.urls]` (Repository, Source, Homepage), at the
tag on HEAD, else HEAD's commit, else the version's tag `v<version>`. None when nothing says where the
project is hosted: the caller tells the user to set runbookUrl.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from reactor.tools.rules.hosting import Ref, RefKind, Repository, file_url, repository

RUNBOOKS_PATH = "docs/runbooks.md"
# PEP 753's normalized labels of [project.urls] that name the source repository, most specific first.
_URL_LABELS = ("repository", "source", "sourcecode", "code", "homepage")
_GIT_TIMEOUT_S = 10


@dataclass(frozen=True, slots=True)
class CheckoutFacts:
    """What git and pyproject.toml say about a checkout; every field may be missing."""

    remote: str | None = None
    tag: str | None = None
    commit: str | None = None
    project_urls: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    version: str | None = None


@dataclass(frozen=True, slots=True)
class RunbookBase:
    """The runbook links' base (`#<anchor>` is appended) and, for the user, where it came from."""

    url: str
    origin: str
    warning: str | None = None  # said when `auto` could not be resolved and an older base was kept


UNRESOLVED_HELP = (
    "auto could not tell where this project is hosted (no git remote `origin` with a forge URL, "
    "no Repository/Source/Homepage in pyproject.toml's [project.urls]); set runbookUrl in the values file "
    f"to the https URL of {RUNBOOKS_PATH} in your repository, e.g. "
    f"https://github.com/YOU/gpu-reactor/blob/main/{RUNBOOKS_PATH}"
)


def _normalize_label(label: str) -> str:
    return re.sub(r"[^a-z]", "", label.lower())


def _from_project_urls(urls: Mapping[str, str]) -> tuple[Repository, str] | None:
    by_label = {_normalize_label(k): v for k, v in urls.items() if isinstance(v, str)}
    for label in _URL_LABELS:
        if label in by_label and (repo := repository(by_label[label])) is not None:
            return repo, f"pyproject.toml [project.urls] {label}"
    return None


def _ref(facts: CheckoutFacts) -> tuple[Ref, str] | None:
    if facts.tag:
        return Ref(facts.tag, RefKind.TAG), f"tag {facts.tag}"
    if facts.commit:
        return Ref(facts.commit, RefKind.COMMIT), f"commit {facts.commit[:12]}"
    if facts.version:
        return Ref(f"v{facts.version}", RefKind.TAG), f"the version's tag v{facts.version}"
    return None


def resolve(facts: CheckoutFacts) -> RunbookBase | None:
    """The base URL `auto` stands for, or None when nothing is known (pure)."""
    found: tuple[Repository, str] | None = None
    if facts.remote and (repo := repository(facts.remote)) is not None:
        found = repo, "git remote origin"
    if found is None:
        found = _from_project_urls(facts.project_urls)
    ref = _ref(facts)
    if found is None or ref is None:
        return None
    (repo, where), (at, which) = found, ref
    guess = "" if repo.forge_known else f"; {repo.host} is not a known forge: GitHub's URL form assumed"
    return RunbookBase(file_url(repo, at, RUNBOOKS_PATH), f"{where} {repo.home} at {which}{guess}")


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None  # no git, or a hung credential helper: as if nothing were known
    out = done.stdout.strip()
    return out if done.returncode == 0 and out else None


def _pyproject(root: Path) -> tuple[Mapping[str, str], str | None]:
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return {}, None
    urls = project.get("urls", {})
    version = project.get("version")
    return (urls if isinstance(urls, dict) else {}), (version if isinstance(version, str) else None)


def read_checkout(root: Path) -> CheckoutFacts:
    """What the repository at `root` says about itself (a folder outside any repository says nothing)."""
    inside = _git(root, "rev-parse", "--show-toplevel")
    urls, version = _pyproject(root)
    if inside is None:
        return CheckoutFacts(project_urls=MappingProxyType(dict(urls)), version=version)
    return CheckoutFacts(
        remote=_git(root, "remote", "get-url", "origin"),
        tag=_git(root, "describe", "--tags", "--exact-match", "HEAD"),
        commit=_git(root, "rev-parse", "--verify", "--quiet", "HEAD"),
        project_urls=MappingProxyType(dict(urls)),
        version=version,
    )
