"""Where a file of this project can be read in a browser, from a git remote: the base of the runbook links.

Purely computational: `repository(remote)` reads the remote URL forms git accepts (https, ssh://, scp-like
`git@host:owner/repo.git`, git://) and `file_url` spells the forge's browse URL for a file at a commit or
tag. `heading_anchor` is the fragment GitHub (and GitLab, Gitea) give a Markdown heading. Running git and
reading pyproject.toml is checkout.py's job.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit


class Forge(enum.StrEnum):
    """How a forge spells a file at a ref: GitHub `blob/REF`, GitLab `-/blob/REF`, Gitea `src/commit|tag/REF`."""

    GITHUB = "github"
    GITLAB = "gitlab"
    GITEA = "gitea"


class RefKind(enum.StrEnum):
    COMMIT = "commit"
    TAG = "tag"


@dataclass(frozen=True, slots=True)
class Repository:
    """A repository's browsable home: `https://HOST/PATH`, and which forge serves it (a guess by host name)."""

    scheme: str
    host: str
    path: str
    forge: Forge
    forge_known: bool  # False: an unknown host, assumed to browse like GitHub

    @property
    def home(self) -> str:
        return f"{self.scheme}://{self.host}/{self.path}"


@dataclass(frozen=True, slots=True)
class Ref:
    name: str
    kind: RefKind


_SCP = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^/:]+):(?P<path>[^/].*)$")
_GITEA_HOSTS = ("codeberg.org", "gitea", "forgejo")


def _forge(host: str) -> tuple[Forge, bool]:
    name = host.lower()
    if "github" in name:
        return Forge.GITHUB, True
    if "gitlab" in name:
        return Forge.GITLAB, True
    if any(h in name for h in _GITEA_HOSTS):
        return Forge.GITEA, True
    return Forge.GITHUB, False


def _clean_path(path: str) -> str | None:
    path = path.strip("/")
    path = path.removesuffix(".git").rstrip("/")
    parts = path.split("/")
    if len(parts) < 2 or any(not p or p in (".", "..") or p.startswith("~") for p in parts):
        return None  # not owner/repo (or group/subgroup/repo): a local path or a server-relative one
    return path


def repository(remote: str) -> Repository | None:
    """The browsable repository behind a git remote URL; None for a local path or anything not a forge's.

    Credentials in the URL are dropped (they must never end up in an alert), and so is an ssh port: the
    web server answers on https's.
    """
    remote = remote.strip()
    scheme, host, path = "https", "", ""
    if "://" in remote:
        parts = urlsplit(remote)
        if parts.scheme not in ("https", "http", "ssh", "git", "git+ssh", "ssh+git") or not parts.hostname:
            return None
        host, path = parts.hostname, parts.path
        if parts.scheme in ("https", "http"):
            scheme = parts.scheme
            if parts.port is not None:
                host = f"{host}:{parts.port}"
    else:
        match = _SCP.match(remote)
        if match is None or "/" in match["host"]:
            return None
        host, path = match["host"], match["path"]
    cleaned = _clean_path(path)
    if cleaned is None:
        return None
    if host.lower() == "ssh.github.com":  # GitHub's ssh-over-443 host
        host = "github.com"
    forge, known = _forge(host)
    return Repository(scheme, host.lower(), cleaned, forge, known)


def file_url(repo: Repository, ref: Ref, path: str) -> str:
    """The forge's page showing `path` at `ref`."""
    if repo.forge is Forge.GITLAB:
        return f"{repo.home}/-/blob/{ref.name}/{path}"
    if repo.forge is Forge.GITEA:
        return f"{repo.home}/src/{ref.kind.value}/{ref.name}/{path}"
    return f"{repo.home}/blob/{ref.name}/{path}"


_INLINE_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def heading_anchor(text: str) -> str:
    """GitHub's id for a heading's text (github-slugger): the rendered text lower-cased, every character that
    is not a letter, digit, mark, `_`, `-` or space dropped, each space a `-`. GitLab and Gitea agree on
    headings without runs of spaces or hyphens, which is all docs/runbooks.md uses."""
    text = _INLINE_LINK.sub(r"\1", text).replace("`", "").strip().lower()
    kept = (c for c in text if c in "-_ " or unicodedata.category(c)[0] in "LNM")
    return "".join(kept).replace(" ", "-")


def anchors(markdown: str) -> list[str]:
    """The ids of every ATX heading of a Markdown document, duplicates numbered as GitHub does (`x`, `x-1`)."""
    seen: dict[str, int] = {}
    out: list[str] = []
    for line in _headings(markdown.splitlines()):
        slug = heading_anchor(line)
        if slug in seen:
            seen[slug] += 1
            slug = f"{slug}-{seen[slug]}"
        else:
            seen[slug] = 0
        out.append(slug)
    return out


def _headings(lines: Iterable[str]) -> Iterable[str]:
    fenced = False
    for line in lines:
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        match = re.match(r"^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$", line)
        if match and not fenced:
            yield match[1] or ""
