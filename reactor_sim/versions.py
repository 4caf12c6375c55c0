"""The Kubernetes release the embedded cluster plays: what `/version` says, and what each release serves.

Each difference modelled names the upstream release (and KEP) that brought it; a release not listed in
MODELLED is refused, so no test or demo runs against a version nobody checked:

- `pods/resize` (KEP-1287, in-place pod resize): pkg/registry/core/rest/storage_core.go registers it only
  while the InPlacePodVerticalScaling gate is on, which is beta and on by default from v1.33 (alpha, off,
  before). Below 1.33 discovery lists no `pods/resize` and a request to it is the unknown-path 404.
- The resize's verdict: the PodResizePending / PodResizeInProgress pod conditions came with v1.33 (KEP-1287
  beta); v1.27–v1.32, with the alpha gate turned on, wrote `status.resize` instead: `Proposed` set by the API
  server on the resize (pkg/api/pod/util.go MarkPodProposedForResize), then the kubelet's `InProgress`,
  `Deferred` or `Infeasible`, cleared once applied. `KubeVersion(32, in_place=True)` plays a v1.32 server with
  the gate turned on: pods/resize served, the verdict in `status.resize`.
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


IN_PLACE_GATE = "InPlacePodVerticalScaling"


@dataclass(frozen=True, slots=True)
class KubeVersion:
    """One modelled release, `1.<minor>`; `in_place`: the InPlacePodVerticalScaling gate as turned on or off
    (`--feature-gates`), None for the release's default (on from 1.33)."""

    minor: int
    in_place: bool | None = None

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
        """pods/resize (KEP-1287): the subresource came with v1.32 behind InPlacePodVerticalScaling, which is on by
        default from v1.33 (and may be turned off there). Before 1.32 the gate resized through the pod itself,
        which is not modelled: no pods/resize whatever the gate."""
        if self.minor < 32:
            return False
        return self.minor >= 33 if self.in_place is None else self.in_place

    @property
    def resize_conditions(self) -> bool:
        """The verdict as PodResizePending/PodResizeInProgress conditions (v1.33+), else `status.resize`."""
        return self.minor >= 33

    def with_gate(self, gate: str, enabled: bool) -> KubeVersion:
        """This release with a feature gate set as `--feature-gates` would (only InPlacePodVerticalScaling)."""
        if gate != IN_PLACE_GATE:
            raise ValueError(f"feature gate {gate!r} is not modelled: only {IN_PLACE_GATE}")
        return KubeVersion(self.minor, enabled)

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
