"""Kubeflow Notebook v1: one pod template at spec.template.spec, run by a StatefulSet the notebook controller creates
(no replicas of its own). Follows the operator's published CRD (tests/fixtures/crds). Pure: no I/O.
"""

from __future__ import annotations

from reactor.integrations.adapters import naming
from reactor.integrations.adapters.base import Adapter, Obj, Part
from reactor.integrations.adapters.status import child_rollout


def _notebook_parts(obj: Obj) -> tuple[Part, ...]:
    return (Part("", ("spec", "template", "spec"), default_replicas=1),)


def _notebook_rollout(obj: Obj, child: Obj | None) -> str:
    return child_rollout(child)


# The notebook controller labels only the pod template (generateStatefulSet): no owner label on the StatefulSet.
NOTEBOOK = Adapter("Notebook", "kubeflow.org", "v1", "notebooks", frozenset({"StatefulSet"}), _notebook_parts,
                   rollout=_notebook_rollout, names_child=naming.notebook)
