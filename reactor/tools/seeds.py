"""Seeds for an embedded cluster: the manifests a person names with `--seed`, or the demo cluster by default.

Every seed is read before anything is applied, so a typo in the second path changes nothing; a seed that
cannot be read is a `UsageError` naming the flag and the path. It never starts or stops a cluster itself.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactor.core.errors import UsageError

if TYPE_CHECKING:  # imported where used: `reactor plan --kubeconfig` runs where the embedded cluster is not installed
    from reactor_sim import SimCluster

DEMO_DATA = "reactor.tools.demo_data"
DEMO_CLUSTER = "the demo cluster (reactor/tools/demo_data/cluster.yaml)"


def demo_file(name: str) -> Path:
    """A file of the demo's data (`cluster.yaml`, `policy.yaml`, `alerts-*.json`) as a path on disk."""
    return Path(str(resources.files(DEMO_DATA).joinpath(name)))


def read_seeds(paths: list[str], flag: str = "--seed") -> list[tuple[str, list[dict[str, Any]]]]:
    """(path, objects) per seed, in order; `[]` reads the demo cluster."""
    from reactor_sim import manifests

    if not paths:
        return [(DEMO_CLUSTER, manifests.read(demo_file("cluster.yaml")))]
    return [(path, _read(Path(path), flag)) for path in paths]


def _read(path: Path, flag: str) -> list[dict[str, Any]]:
    from reactor_sim import manifests

    if not path.exists():
        raise UsageError(f"{flag} {path}", "no such file or folder; give a manifest file, a folder or a kustomization")
    try:
        return manifests.read(path)
    except (OSError, ValueError, RuntimeError) as e:
        raise UsageError(f"{flag} {path}", f"cannot read the manifests: {e}") from e


def missing_namespaces(sim: SimCluster, docs: list[dict[str, Any]]) -> list[str]:
    """Namespaces the objects live in that neither they nor the cluster define."""
    defined = {d["metadata"]["name"] for d in docs if d.get("kind") == "Namespace" and d.get("metadata")}
    used = {(d.get("metadata") or {}).get("namespace") for d in docs} - defined - {None, ""}
    return sorted(n for n in used if isinstance(n, str) and not sim.store.exists("namespaces", None, n))


def apply_seeds(sim: SimCluster, seeds: list[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Apply every seed's objects in one go (namespaces a seed only uses are created first); settle the cluster."""
    from reactor_sim import ApiError

    docs = [d for _, found in seeds for d in found]
    docs += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in missing_namespaces(sim, docs)]
    try:
        loaded: list[dict[str, Any]] = sim.apply(docs)
    except (ApiError, ValueError, RuntimeError) as e:
        raise UsageError("--seed", f"the embedded cluster refused the manifests: {e}") from e
    sim.settle()
    return loaded
