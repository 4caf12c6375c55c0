"""The Kubernetes release the embedded cluster plays: what `/version` says, and what each release serves.

Each difference modelled names the upstream release (and KEP) that brought it; a release not listed in
MODELLED is refused, so no test or demo runs against a version nobody checked:

- `pods/resize` (KEP-1287, in-place pod resize): pkg/registry/core/rest/storage_core.go registers it only
  while the InPlacePodVerticalScaling gate is on, which is beta and on by default from v1.33 (alpha, off,
  before). Below 1.33 discovery lists no `pods/resize` and a request to it is the unknown-path 404.
- The resize's verdict: the PodResizePending / PodResizeInProgress pod conditions came with v1.33 (KEP-1287
  beta); v1.27–v1.32, with the alpha gate turned on, wrote `status.resize` instead. Here only 1.33+ resizes,
  so only the conditions appear (the reactor reads both shapes).
- Sidecar containers (KEP-753): an init container's `restartPolicy: Always` is kept from v1.29 (SidecarContainers
  beta, on by default); at v1.28 (alpha, off) pkg/api/pod/util.go dropDisabledFields drops the field, so the
  container is an ordinary init container (it runs to completion before the others start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MODELLED = ("1.28", "1.32", "1.33", "1.35")
NEWEST = MODELLED[-1]
# Build metadata for /version: the fields are upstream's, the values illustrative (the reactor reads
# gitVersion, major and minor only).
_GO = {28: "go1.20.7", 32: "go1.23.3", 33: "go1.24.2", 35: "go1.25.5"}
_BUILT = {28: "2023-08-15T10:15:51Z", 32: "2024-12-11T17:57:54Z", 33: "2025-04-23T13:13:00Z",
          35: "2025-12-17T12:00:00Z"}


@dataclass(frozen=True, slots=True)
class KubeVersion:
    """One modelled release, `1.<minor>`."""

    minor: int

    @classmethod
    def parse(cls, text: str) -> KubeVersion:
        """`1.28`, `v1.33` or `1.35.0` → the release; ValueError naming the modelled ones otherwise."""
        raw = text.strip().removeprefix("v")
        parts = raw.split(".")
        if len(parts) in (2, 3) and ".".join(parts[:2]) in MODELLED and (len(parts) == 2 or parts[2] == "0"):
            return cls(int(parts[1]))
        raise ValueError(f"Kubernetes {text!r} is not modelled: choose one of {', '.join(MODELLED)}")

    def __str__(self) -> str:
        return f"1.{self.minor}"

    @property
    def serves_resize(self) -> bool:
        """pods/resize (KEP-1287): InPlacePodVerticalScaling on by default from v1.33."""
        return self.minor >= 33

    @property
    def sidecars(self) -> bool:
        """Init containers with `restartPolicy: Always` (KEP-753): SidecarContainers on by default from v1.29."""
        return self.minor >= 29

    def version_info(self) -> dict[str, Any]:
        """`/version` (k8s.io/apimachinery/pkg/version.Info) as v1.<minor>.0 answers it."""
        return {"major": "1", "minor": str(self.minor), "gitVersion": f"v1.{self.minor}.0",
                "gitCommit": "sim", "gitTreeState": "clean", "buildDate": _BUILT.get(self.minor, ""),
                "goVersion": _GO.get(self.minor, ""), "compiler": "gc", "platform": "linux/amd64"}


DEFAULT = KubeVersion.parse(NEWEST)
