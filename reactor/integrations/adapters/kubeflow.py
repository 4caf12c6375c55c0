"""Kubeflow Notebook v1: one pod template at spec.template.spec, run by a StatefulSet the notebook controller creates
(no replicas of its own). Follows the operator's published CRD (tests/fixtures/crds). Pure: no I/O.
"""

from __future__ import annotations

from reactor.integrations.adapters import naming
from reactor.integrations.adapters.base import Adapter, Obj, Part
from reactor.integrations.adapters.status import child_rollout


class NotebookAdapter(Adapter):
    """The notebook's template; its rollout is its StatefulSet's."""

    def parts(self, obj: Obj) -> tuple[Part, ...]:
        return (Part("", ("spec", "template", "spec"), default_replicas=1),)

    def rollout(self, obj: Obj, child: Obj | None) -> str:
        return child_rollout(child)

    def names_child(self, owner: Obj, child_kind: str, child: Obj) -> str | None:
        return naming.notebook(owner, child_kind, child)


# The notebook controller labels only the pod template (generateStatefulSet): no owner label on the StatefulSet.
NOTEBOOK = NotebookAdapter("Notebook", "kubeflow.org", "v1", "notebooks", frozenset({"StatefulSet"}))
