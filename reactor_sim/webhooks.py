"""Validating admission webhooks of the operators whose CRDs the tests install, where they refuse updates.

kube-apiserver calls an operator's validating webhook after the object passed its schema; a denial comes back
as the webhook answered it, its message prefixed `admission webhook "<name>" denied the request: `. Only the
rules the reactor's writes can meet are played here, so a test cannot pass on a write the real cluster refuses:

JobSet (kubernetes-sigs/jobset `pkg/webhooks/jobset_webhook.go` ValidateUpdate, webhook `vjobset.kb.io`):
`spec.replicatedJobs` is immutable, except that while the old or the new JobSet is suspended each
replicatedJob's pod-template labels, annotations, nodeSelector, tolerations and schedulingGates may change;
`spec.managedBy` is immutable. v0.12.0 returns `apierrors.NewInvalid(JobSet, name, errs)`, an APIStatus that
controller-runtime passes on as it is (validationResponseFromStatus) and kube-apiserver keeps, code and details
included (webhookerrors.ToStatusErr): 422 Invalid, `JobSet.jobset.x-k8s.io "<name>" is invalid: <errors>` after
the denial prefix. Pure: compares two objects, reads and writes nothing.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from reactor_sim.registry import Resource
from reactor_sim.status import ApiError

Obj = dict[str, Any]
JOBSET_WEBHOOK = "vjobset.kb.io"
# Pod-template fields the JobSet webhook lets change while the JobSet is (or is being) suspended.
_SUSPENDED_MUTABLE_META = ("labels", "annotations")
_SUSPENDED_MUTABLE_SPEC = ("nodeSelector", "tolerations", "schedulingGates")


def validate_update(res: Resource, old: Obj, new: Obj) -> None:
    """ApiError as the operator's webhook answers an update it refuses; nothing for kinds without one."""
    if (res.group, res.plural) == ("jobset.x-k8s.io", "jobsets"):
        errors = _jobset_update(old.get("spec") or {}, new.get("spec") or {})
        if errors:
            name = str((new.get("metadata") or {}).get("name", ""))
            joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
            causes = [{"reason": "FieldValueInvalid", "message": e.split(": ", 1)[1], "field": e.split(": ", 1)[0]}
                      for e in errors]
            message = f'{res.qualified_kind} "{name}" is invalid: {joined}'
            raise ApiError(422, "Invalid", f'admission webhook "{JOBSET_WEBHOOK}" denied the request: {message}',
                           {"name": name, "group": res.group, "kind": res.kind, "causes": causes})


def _jobset_update(old: Obj, new: Obj) -> list[str]:
    jobs_old, jobs_new = old.get("replicatedJobs"), copy.deepcopy(new.get("replicatedJobs"))
    if (old.get("suspend") is True or new.get("suspend") is True) and isinstance(jobs_new, list) \
            and isinstance(jobs_old, list):
        for index, job in enumerate(jobs_new[:len(jobs_old)]):
            _keep_mutable(job, jobs_old[index])
    errors = []
    if jobs_new != jobs_old:
        errors.append(_immutable("spec.replicatedJobs", new.get("replicatedJobs")))
    if new.get("managedBy") != old.get("managedBy"):
        errors.append(_immutable("spec.managedBy", new.get("managedBy")))
    return errors


def _keep_mutable(job: Any, old_job: Any) -> None:
    """Copy the old values of the fields a suspended JobSet may change onto `job`, as the webhook munges them."""
    if not isinstance(job, dict) or not isinstance(old_job, dict):
        return
    template = _path(job, ("template", "spec", "template"))
    old_template = _path(old_job, ("template", "spec", "template")) or {}
    if template is None:
        return
    meta, old_meta = template.setdefault("metadata", {}), old_template.get("metadata") or {}
    spec, old_spec = template.setdefault("spec", {}), old_template.get("spec") or {}
    pairs = ((_SUSPENDED_MUTABLE_META, meta, old_meta), (_SUSPENDED_MUTABLE_SPEC, spec, old_spec))
    for fields, target, source in pairs:
        for name in fields:
            if name in source:
                target[name] = copy.deepcopy(source[name])
            else:
                target.pop(name, None)
    if not meta and "metadata" not in old_template:
        template.pop("metadata")


def _path(obj: Obj, steps: tuple[str, ...]) -> Obj | None:
    node: Any = obj
    for step in steps:
        node = node.get(step) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _immutable(field: str, value: Any) -> str:
    """apimachinery's ValidateImmutableField error: `<field>: Invalid value: <value>: field is immutable`."""
    return f"{field}: Invalid value: {json.dumps(value, sort_keys=True, separators=(',', ':'))}: field is immutable"
