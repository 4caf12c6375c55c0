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

_SCP = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^/:]+):(?P<path>[^/].*)$")
_GITEA_HOSTS = ("codeberg.org", "gitea", "forgejo")


class Forge(enum.StrEnum):
    """A forge, as guessed from a host name (`of`), and how its pages spell a file at a ref (`blob`)."""

    GITHUB = enum.auto()
    GITLAB = enum.auto()
    GITEA = enum.auto()

    @classmethod
    def of(cls, host: str) -> tuple[Forge, bool]:
        """The forge a host name says, and whether it says one: an unknown host is assumed to browse like GitHub."""
        name = host.lower()
        if "github" in name:
            return Forge.GITHUB, True
        if "gitlab" in name:
            return Forge.GITLAB, True
        if any(h in name for h in _GITEA_HOSTS):
            return Forge.GITEA, True
        return Forge.GITHUB, False

    def blob(self, ref: Ref) -> str:
        """From a repository's home to its files at `ref`: GitHub `blob/REF`, GitLab `-/blob/REF`, Gitea
        `src/commit|tag/REF`."""
        if self is Forge.GITLAB:
            return f"-/blob/{ref.name}"
        if self is Forge.GITEA:
            return f"src/{ref.kind.value}/{ref.name}"
        return f"blob/{ref.name}"


@dataclass(frozen=True, slots=True)
class Repository:
    """A repository's browsable home (`https://HOST/PATH`), its host, and which forge serves it (a guess by host
    name, `forge_known` False for an unknown host)."""

    home: str
    host: str
    forge: Forge
    forge_known: bool


class RefKind(enum.StrEnum):
    """How Gitea spells a ref in a file's URL (`src/commit/REF`, `src/tag/REF`); the other forges do not."""

    COMMIT = enum.auto()
    TAG = enum.auto()


@dataclass(frozen=True, slots=True)
class Ref:
    name: str
    kind: RefKind


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
    forge, known = Forge.of(host)
    return Repository(f"{scheme}://{host.lower()}/{cleaned}", host.lower(), forge, known)


def file_url(repo: Repository, ref: Ref, path: str) -> str:
    """The forge's page showing `path` at `ref`."""
    return f"{repo.home}/{repo.forge.blob(ref)}/{path}"


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
