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


# Why a change of a Notebook's Kueue priority label is refused (kueue.py `as_managed`): it would reach nothing.
KUEUE_LABEL_STAYS = (
    "the notebook controller copies a Notebook's labels into its StatefulSet's pod template only when it creates the "
    "StatefulSet (kubeflow/notebooks v1.11.0 notebook_controller.go generateStatefulSet); every later reconcile "
    "copies the template's spec and never its metadata (reconcilehelper CopyStatefulSetFields), and Kueue has no "
    "Notebook integration: it sees the label only on the pods. A changed kueue.x-k8s.io/priority-class reaches no "
    "running pod, no pod created later and no Kueue Workload: the change would change nothing")

# The notebook controller labels only the pod template (generateStatefulSet): no owner label on the StatefulSet.
NOTEBOOK = NotebookAdapter("Notebook", "kubeflow.org", "v1", "notebooks", frozenset({"StatefulSet"}))
