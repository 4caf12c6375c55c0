"""What the API server can do, asked of it: its version (`/version`) and what it serves (discovery).

Read at start and again after a reconnect (a transport failure: the server may have been upgraded or rolled
back meanwhile) and after a request met a subresource the server does not serve. The reactor decides from
this, never from the release calendar: a v1.33 server with InPlacePodVerticalScaling turned off serves no
`pods/resize`, and a v1.32 one with it turned on does. Where discovery is not answered (an RBAC-less token
is still allowed it: system:discovery), nothing is assumed served.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

RESIZE = "pods/resize"


@dataclass(frozen=True, slots=True)
class Capabilities:
    """The server's answers: gitVersion, major.minor, and the core/v1 resources and subresources it serves."""

    git_version: str = ""
    major: int = 0
    minor: int = 0
    core: frozenset[str] = field(default_factory=frozenset)  # names in /api/v1: "pods", "pods/resize", ...
    known: bool = False  # False: discovery was not answered; nothing is taken as served

    @classmethod
    def from_discovery(cls, version: dict[str, Any], core: dict[str, Any]) -> Capabilities:
        """From `/version` (version.Info) and `/api/v1` (APIResourceList)."""
        names = frozenset(str(r.get("name")) for r in core.get("resources") or [] if isinstance(r, dict))
        return cls(git_version=str(version.get("gitVersion") or ""), major=_number(version.get("major")),
                   minor=_number(version.get("minor")), core=names, known=True)

    @property
    def version(self) -> str:
        """`v1.33.2` as the server says it; `1.33` when it gives no gitVersion; `unknown` unanswered."""
        if self.git_version:
            return self.git_version
        return f"{self.major}.{self.minor}" if self.known else "unknown"

    @property
    def in_place_resize(self) -> bool:
        """Does the server serve pods/resize (KEP-1287: on by default from v1.33)? Discovery says, not the version."""
        return RESIZE in self.core

    @property
    def sidecars(self) -> bool:
        """Does the server keep an init container's `restartPolicy: Always` (KEP-753, on by default from v1.29)?
        No discovery entry tells; the version does (a server older than 1.29 drops the field)."""
        return self.known and (self.major, self.minor) >= (1, 29)

    @property
    def scoped_quotas(self) -> bool:
        """ResourceQuota `scopeSelector` with the PriorityClass scope: GA since v1.17, so every supported
        release; the version is still asked (a server that answers none is not taken at its word)."""
        return self.known and (self.major, self.minor) >= (1, 17)

    def in_place_refusal(self) -> str | None:
        """Why a change cannot go to the running pods (None: it can), for the Skip that refuses it."""
        if self.in_place_resize:
            return None
        if not self.known:
            return f"the API server's discovery was not answered: {RESIZE} not known to be served"
        return (f"the API server ({self.version}) serves no {RESIZE} (in-place resize: Kubernetes 1.33+, "
                "InPlacePodVerticalScaling): refused rather than restart the pods through the template "
                "(cpu.applyTo: template or both allows that)")


UNKNOWN = Capabilities()


def _number(raw: Any) -> int:
    """`28`, or a provider's `28+` (EKS, GKE): the leading digits; 0 when there are none."""
    found = re.match(r"\d+", str(raw or ""))
    return int(found.group()) if found else 0
