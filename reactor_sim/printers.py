"""The columns and cells kube-apiserver gives kubectl for the built-in kinds (`kubectl get`, `-o wide`).

Upstream: kubernetes pkg/printers/internalversion/printers.go — `AddHandlers` (each kind's
`...ColumnDefinitions`; `Priority: 1` marks the columns kubectl shows only with `-o wide`) and the `print<Kind>`
functions (the cells); the server always generates the wide row (pkg/printers/storage/storage.go
`TableConvertor.ConvertToTable`: `GenerateOptions{Wide: true}`), kubectl drops the priority columns itself. AGE and
the other times are `translateTimestampSince` → apimachinery pkg/util/duration `HumanDuration`.

The copy read (checked against each function below) is a master snapshot from between Jan and Jul 2025 (the v1.33
cycle or early v1.34): it has v1.32's additions (MutatingAdmissionPolicy printers, coordination v1alpha2
LeaseCandidate, resource v1beta1) and one change made after v1.32.0 (PR #129419, Jan 2025: ResourceQuota's Age moved
last), but not PR #132832 (Jul 2025, v1.34: printJob's "SuccessCriteriaMet" status). This module keeps v1.32:
ResourceQuota is Name, Age, Request, Limit, and printJob has no SuccessCriteriaMet. Column descriptions are the
`SwaggerDoc()` texts the column definitions name, taken from kubernetes/api and apimachinery v0.32.x
`types_swagger_doc_generated.go` (identical v0.32.0..v0.32.9); note the extensions/v1beta1 and batch/v1beta1 types
some of them name, whose texts differ from apps/v1's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reactor_sim.selectors import label_selector_string

Obj = dict[str, Any]
Cell = str | int | bool | None

NAME_DOC = ("Name must be unique within a namespace. Is required when creating resources, although some resources "
            "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
            "intended for creation idempotence and configuration definition. Cannot be updated. More info: "
            "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
CREATED_DOC = ("CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
               "guaranteed to be set in happens-before order across separate operations. Clients may not set this "
               "value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null "
               "for lists. More info: "
               "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")
CONTAINERS_DOC = "Names of each container in the template."
# SwaggerDoc texts of kubernetes/api v0.32.x (core/v1, batch/v1beta1) too long to inline in the column table.
NODE_ADDRESSES_DOC = (  # core/v1 NodeStatus.addresses
    "List of addresses reachable to the node. Queried from cloud provider, if available. More info: "
    "https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, "
    "but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers "
    "should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should "
    "assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this "
    "may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the "
    "downward API (status.hostIP).")
TIME_ZONE_DOC = (  # batch/v1beta1 CronJobSpec.timeZone
    "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. "
    "If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid "
    "time zone names and the time zone offset is loaded from the system-wide time zone database by the API server "
    "during CronJob validation and the controller manager during execution. If no system-wide time zone database "
    "can be found a bundled version of the database is used instead. If the time zone name becomes invalid during "
    "the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new "
    "Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in "
    "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones")
CONFIG_MAP_DATA_DOC = (  # core/v1 ConfigMap.data
    "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. "
    "Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap "
    "with the keys in the BinaryData field, this is enforced during validation process.")
SECRET_DATA_DOC = (  # core/v1 Secret.data
    "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The "
    "serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly "
    "non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4")
SA_SECRETS_DOC = (  # core/v1 ServiceAccount.secrets
    "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed "
    "to use. Pods are only limited to this list if this service account has a "
    "\"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The "
    "\"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces "
    "to isolate access to mounted secrets. This field should not be used to find auto-generated service account "
    "token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, "
    "or service account token secrets can be manually created. More info: "
    "https://kubernetes.io/docs/concepts/configuration/secret")
IMAGES_DOC = "Images referenced by each container in the template."


def column(name: str, kind: str = "string", doc: str = "", *, priority: int = 0, fmt: str = "") -> Obj:
    """One metav1.TableColumnDefinition as JSON (every field is sent, none has `omitempty`)."""
    return {"name": name, "type": kind, "format": fmt, "description": doc, "priority": priority}


NAME = column("Name", "string", NAME_DOC, fmt="name")
AGE = column("Age", "string", CREATED_DOC)


@dataclass(frozen=True)
class Printer:
    columns: tuple[Obj, ...]
    cells: Callable[[Obj, datetime], list[Cell]]


# --- helpers, each mirroring the printers.go / apimachinery function of the same name ---

def human_duration(seconds: float) -> str:
    """apimachinery pkg/util/duration `HumanDuration`."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if rest == 0 else f"{hours // 24 // 365}y{rest}d"
    return f"{hours // 24 // 365}y"


def parse_time(value: Any) -> datetime | None:
    """A metav1.Time / MicroTime in its RFC 3339 JSON form; None when unset or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def since(value: Any, now: datetime) -> str:
    """`translateTimestampSince` (and `translateMicroTimestampSince`): "<unknown>" for a zero time."""
    when = parse_time(value)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


def age(obj: Obj, now: datetime) -> str:
    return since((obj.get("metadata") or {}).get("creationTimestamp"), now)


def name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def layout_containers(containers: list[Obj] | None) -> tuple[str, str]:
    """`layoutContainerCells`: the containers' names and images, comma-separated."""
    containers = containers or []
    return ",".join(str(c.get("name", "")) for c in containers), ",".join(str(c.get("image", "")) for c in containers)


def format_selector(selector: Obj | None) -> str:
    """metav1 `FormatLabelSelector`: "<error>" where the conversion errs, "<none>" for an empty string."""
    text = label_selector_string(selector)
    return "<error>" if text is None else (text or "<none>")


def print_bool_ptr(value: Any) -> str:
    """printers.go `printBoolPtr` / `printBool`: "True" / "False", "<unset>" for nil."""
    if value is None:
        return "<unset>"
    return "True" if value else "False"


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _has_condition(obj: Obj, ctype: str) -> bool:
    """`hasJobCondition`: the FIRST condition of that type decides (its status is True)."""
    for cond in _status(obj).get("conditions") or []:
        if cond.get("type") == ctype:
            return bool(cond.get("status") == "True")
    return False


# --- the kinds ---

def _deployment(obj: Obj, now: datetime) -> list[Cell]:
    """printDeployment: READY "ready/desired"; SELECTOR is `LabelSelectorAsSelector(...).String()` ("<invalid>"
    on error, "" for none — not FormatLabelSelector's "<none>")."""
    spec, status = _spec(obj), _status(obj)
    names, images = layout_containers(((spec.get("template") or {}).get("spec") or {}).get("containers"))
    selector = label_selector_string(spec.get("selector"))
    return [name(obj), f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'))}",
            _int(status.get("updatedReplicas")), _int(status.get("availableReplicas")), age(obj, now),
            names, images, "<invalid>" if selector is None else selector]


def _replica_set(obj: Obj, now: datetime) -> list[Cell]:
    """printReplicaSet: SELECTOR is `metav1.FormatLabelSelector` ("<none>" when empty)."""
    spec, status = _spec(obj), _status(obj)
    names, images = layout_containers(((spec.get("template") or {}).get("spec") or {}).get("containers"))
    return [name(obj), _int(spec.get("replicas")), _int(status.get("replicas")), _int(status.get("readyReplicas")),
            age(obj, now), names, images, format_selector(spec.get("selector"))]


def _stateful_set(obj: Obj, now: datetime) -> list[Cell]:
    """printStatefulSet: READY "ready/desired"; wide: containers and images only (no selector)."""
    spec, status = _spec(obj), _status(obj)
    names, images = layout_containers(((spec.get("template") or {}).get("spec") or {}).get("containers"))
    return [name(obj), f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'))}", age(obj, now),
            names, images]


def _job(obj: Obj, now: datetime) -> list[Cell]:
    """printJob: STATUS from the conditions in printJob's order — Complete, Failed, Terminating (deletion),
    Suspended, FailureTarget, else Running (v1.32 has no SuccessCriteriaMet branch: that is v1.34, PR #132832) —
    COMPLETIONS ("s/c", "s/1 of p" when parallel without completions, "s/1"), DURATION (empty until started)."""
    spec, status = _spec(obj), _status(obj)
    succeeded = _int(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{_int(spec['completions'])}"
    elif _int(spec.get("parallelism")) > 1:
        completions = f"{succeeded}/1 of {_int(spec['parallelism'])}"
    else:
        completions = f"{succeeded}/1"
    start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    duration = "" if start is None else human_duration(((end or now) - start).total_seconds())
    if _has_condition(obj, "Complete"):
        state = "Complete"
    elif _has_condition(obj, "Failed"):
        state = "Failed"
    elif (obj.get("metadata") or {}).get("deletionTimestamp"):
        state = "Terminating"
    elif _has_condition(obj, "Suspended"):
        state = "Suspended"
    elif _has_condition(obj, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    names, images = layout_containers(((spec.get("template") or {}).get("spec") or {}).get("containers"))
    return [name(obj), state, completions, duration, age(obj, now), names, images,
            format_selector(spec.get("selector"))]


def _cron_job(obj: Obj, now: datetime) -> list[Cell]:
    """printCronJob: TIMEZONE "<none>" only when unset, SUSPEND `printBoolPtr` ("True"/"False"/"<unset>"),
    LAST SCHEDULE "<none>" when unset; wide: the job template's containers and FormatLabelSelector."""
    spec, status = _spec(obj), _status(obj)
    last = since(status["lastScheduleTime"], now) if status.get("lastScheduleTime") is not None else "<none>"
    zone = spec.get("timeZone")
    job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    names, images = layout_containers(((job_spec.get("template") or {}).get("spec") or {}).get("containers"))
    return [name(obj), str(spec.get("schedule", "")), "<none>" if zone is None else str(zone),
            print_bool_ptr(spec.get("suspend")), len(status.get("active") or []),
            last, age(obj, now), names, images, format_selector(job_spec.get("selector"))]


def _restartable_init(container: Obj | None) -> bool:
    """`isRestartableInitContainer`: a sidecar (restartPolicy Always)."""
    return bool(container) and (container or {}).get("restartPolicy") == "Always"


def _pod_reason(pod: Obj) -> tuple[int, int, str, int, datetime | None]:
    """printPod's walk over the init and app container statuses: (ready, total, reason, restarts, last restart)."""
    spec, status = _spec(pod), _status(pod)
    inits = {c.get("name"): c for c in spec.get("initContainers") or []}
    total = len(spec.get("containers") or []) + sum(1 for c in inits.values() if _restartable_init(c))
    ready = restarts = sidecar_restarts = 0
    last: datetime | None = None
    sidecar_last: datetime | None = None
    phase = str(status.get("phase", ""))
    reason = str(status.get("reason") or phase)
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    def finished(cs: Obj) -> datetime | None:
        return parse_time(((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))

    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        restarts += _int(cs.get("restartCount"))
        ended = finished(cs)
        if ended and (last is None or ended > last):
            last = ended
        sidecar = _restartable_init(inits.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += _int(cs.get("restartCount"))
            if ended and (sidecar_last is None or ended > sidecar_last):
                sidecar_last = ended
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and _int(terminated.get("exitCode")) == 0:
            continue
        if sidecar and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        if terminated is not None:
            if terminated.get("reason"):
                reason = f"Init:{terminated['reason']}"
            elif _int(terminated.get("signal")):
                reason = f"Init:Signal:{_int(terminated['signal'])}"
            else:
                reason = f"Init:ExitCode:{_int(terminated.get('exitCode'))}"
        elif waiting is not None and waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or [])}"
        initializing = True
        break
    # isPodInitializedConditionTrue: the FIRST Initialized condition decides.
    initialized = next((c.get("status") == "True" for c in status.get("conditions") or []
                        if c.get("type") == "Initialized"), False)
    if not initializing or initialized:
        restarts, last = sidecar_restarts, sidecar_last
        running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += _int(cs.get("restartCount"))
            ended = finished(cs)
            if ended and (last is None or ended > last):
                last = ended
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting") or {}, state.get("terminated")
            if waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated is not None and terminated.get("reason"):
                reason = str(terminated["reason"])
            elif terminated is not None:
                signal = _int(terminated.get("signal"))
                reason = f"Signal:{signal}" if signal else f"ExitCode:{_int(terminated.get('exitCode'))}"
            elif cs.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                            for c in status.get("conditions") or [])
            reason = "Running" if pod_ready else "NotReady"
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return ready, total, reason, restarts, last


def _pod(pod: Obj, now: datetime) -> list[Cell]:
    """printPod: READY, STATUS (the reason), RESTARTS ("N (AGE ago)"), and the wide IP/NODE/NOMINATED/GATES."""
    spec, status = _spec(pod), _status(pod)
    ready, total, reason, restarts, last = _pod_reason(pod)
    restarts_text = str(restarts)
    if restarts and last is not None:
        restarts_text = f"{restarts} ({human_duration((now - last).total_seconds())} ago)"
    # The v1 PodStatus conversion (Convert_v1_PodStatus_To_core_PodStatus) fills podIPs[0] from podIP.
    ips = status.get("podIPs") or ([{"ip": status["podIP"]}] if status.get("podIP") else [])
    gates = spec.get("readinessGates") or []
    gates_text = "<none>"
    if gates:  # each gate is decided by the FIRST pod condition of its type (printPod's `break`)
        conditions: dict[Any, Any] = {}
        for cond in status.get("conditions") or []:
            conditions.setdefault(cond.get("type"), cond.get("status"))
        gates_text = f"{sum(1 for g in gates if conditions.get(g.get('conditionType')) == 'True')}/{len(gates)}"
    return [name(pod), f"{ready}/{total}", reason, restarts_text, age(pod, now),
            (ips[0].get("ip") if ips else "") or "<none>", spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>", gates_text]


def pod_conditions(pod: Obj) -> list[Obj]:
    """printPod's row conditions: `podSuccessConditions` / `podFailedConditions`."""
    phase = _status(pod).get("phase")
    if phase == "Succeeded":
        return [{"type": "Completed", "status": "True", "reason": "Succeeded",
                 "message": "The pod has completed successfully."}]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return []


def _event(obj: Obj, now: datetime) -> list[Cell]:
    """printEvent (wide): LAST SEEN, TYPE, REASON, OBJECT, SUBOBJECT, SOURCE, MESSAGE, FIRST SEEN, COUNT, NAME."""
    first = since(obj.get("firstTimestamp"), now) if obj.get("firstTimestamp") else since(obj.get("eventTime"), now)
    last = since(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else first
    count = _int(obj.get("count"))
    series = obj.get("series")
    if series is not None:  # a set (even empty) series overrides LAST SEEN and COUNT
        last, count = since(series.get("lastObservedTime"), now), _int(series.get("count"))
    elif count == 0:
        count = 1
    involved = obj.get("involvedObject") or {}
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    return [last, str(obj.get("type", "")), str(obj.get("reason", "")), target, str(involved.get("fieldPath", "")),
            f"{component}, {instance}" if instance else component, str(obj.get("message", "")).strip(), first, count,
            name(obj)]


def _namespace(obj: Obj, now: datetime) -> list[Cell]:
    """printNamespace: STATUS is the phase."""
    return [name(obj), str(_status(obj).get("phase", "")), age(obj, now)]


def _node(obj: Obj, now: datetime) -> list[Cell]:
    """printNode: STATUS from the Ready condition (the LAST one of that type: printNode's conditionMap) or
    "Unknown", +SchedulingDisabled; ROLES `findNodeRoles` (sorted, "<none>"); wide IPs `getNode*IP` ("<none>")."""
    status = _status(obj)
    states = [("Ready" if c.get("status") == "True" else "NotReady")
              for c in status.get("conditions") or [] if c.get("type") == "Ready"][-1:] or ["Unknown"]
    if _spec(obj).get("unschedulable"):
        states.append("SchedulingDisabled")
    labels = (obj.get("metadata") or {}).get("labels") or {}
    roles = {k.removeprefix("node-role.kubernetes.io/") for k in labels
             if k.startswith("node-role.kubernetes.io/") and k != "node-role.kubernetes.io/"}
    if labels.get("kubernetes.io/role"):
        roles.add(labels["kubernetes.io/role"])
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((str(a.get("address") or "") for a in addresses if a.get("type") == kind), "<none>")

    return [name(obj), ",".join(states), ",".join(sorted(roles)) or "<none>", age(obj, now),
            str(info.get("kubeletVersion", "")), address("InternalIP"), address("ExternalIP"),
            info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


def _resource_quota(obj: Obj, now: datetime) -> list[Cell]:
    """printResourceQuota (v1.32 cell order Name, Age, Request, Limit — PR #129419 moved Age last after v1.32):
    "resource: used/hard" pairs sorted by name, `limits.*` under LIMIT, the rest under REQUEST, used "0" when
    absent."""
    status = _status(obj)
    hard, used = status.get("hard") or {}, status.get("used") or {}
    request: list[str] = []
    limit: list[str] = []
    for resource in sorted(hard):
        pieces = resource.split(".")
        (limit if len(pieces) > 1 and pieces[0] == "limits" else request).append(
            f"{resource}: {used.get(resource, '0')}/{hard[resource]}")
    return [name(obj), age(obj, now), ", ".join(request), ", ".join(limit)]


def _priority_class(obj: Obj, now: datetime) -> list[Cell]:
    """printPriorityClass (PREEMPTIONPOLICY only in the wide row; "" when unset)."""
    return [name(obj), _int(obj.get("value")), bool(obj.get("globalDefault")), age(obj, now),
            str(obj.get("preemptionPolicy") or "")]


def _lease(obj: Obj, now: datetime) -> list[Cell]:
    """printLease (HOLDER "" when unset)."""
    return [name(obj), str(_spec(obj).get("holderIdentity") or ""), age(obj, now)]


def _config_map(obj: Obj, now: datetime) -> list[Cell]:
    """printConfigMap: DATA counts data and binaryData keys."""
    return [name(obj), len(obj.get("data") or {}) + len(obj.get("binaryData") or {}), age(obj, now)]


def _secret(obj: Obj, now: datetime) -> list[Cell]:
    """printSecret: DATA is `len(obj.Data)` of the internal Secret, into which the v1 → internal conversion
    (core/v1 conversion.go `Convert_v1_Secret_To_core_Secret`) merges `stringData`: so the union of both keys."""
    keys = set(obj.get("data") or {}) | set(obj.get("stringData") or {})
    return [name(obj), str(obj.get("type") or ""), len(keys), age(obj, now)]


def _service_account(obj: Obj, now: datetime) -> list[Cell]:
    """printServiceAccount: SECRETS counts the `secrets` references."""
    return [name(obj), len(obj.get("secrets") or []), age(obj, now)]


def _pdb(obj: Obj, now: datetime) -> list[Cell]:
    """printPodDisruptionBudget: IntOrString.String() of each bound, "N/A" where one is unset."""
    spec = _spec(obj)
    low, high = spec.get("minAvailable"), spec.get("maxUnavailable")
    return [name(obj), "N/A" if low is None else str(low), "N/A" if high is None else str(high),
            _int(_status(obj).get("disruptionsAllowed")), age(obj, now)]


_WIDE = 1
PRINTERS: dict[tuple[str, str], Printer] = {
    ("apps", "Deployment"): Printer((
        NAME, column("Ready", doc="Number of the pod with ready state"),
        column("Up-to-date", doc="Total number of non-terminated pods targeted by this deployment that have the "
                                 "desired template spec."),
        column("Available", doc="Total number of available pods (ready for at least minReadySeconds) targeted by "
                                "this deployment."),
        AGE, column("Containers", doc=CONTAINERS_DOC, priority=_WIDE), column("Images", doc=IMAGES_DOC, priority=_WIDE),
        column("Selector", doc="Label selector for pods. Existing ReplicaSets whose pods are selected by this will be "
                               "the ones affected by this deployment.", priority=_WIDE)), _deployment),
    ("apps", "ReplicaSet"): Printer((
        NAME, column("Desired", "integer", "Replicas is the number of desired replicas. This is a pointer to "
                     "distinguish between explicit zero and unspecified. Defaults to 1. More info: "
                     "https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/"
                     "#what-is-a-replicationcontroller"),
        column("Current", "integer", "Replicas is the most recently observed number of replicas. More info: "
               "https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/"
               "#what-is-a-replicationcontroller"),
        column("Ready", "integer", "The number of ready replicas for this replica set."),
        AGE, column("Containers", doc=CONTAINERS_DOC, priority=_WIDE), column("Images", doc=IMAGES_DOC, priority=_WIDE),
        column("Selector", doc="Selector is a label query over pods that should match the replica count. If the "
               "selector is empty, it is defaulted to the labels present on the pod template. Label keys and values "
               "that must match in order to be controlled by this replica set. More info: "
               "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
               priority=_WIDE)), _replica_set),
    ("apps", "StatefulSet"): Printer((
        NAME, column("Ready", doc="Number of the pod with ready state"), AGE,
        column("Containers", doc=CONTAINERS_DOC, priority=_WIDE),
        column("Images", doc=IMAGES_DOC, priority=_WIDE)), _stateful_set),
    ("batch", "Job"): Printer((
        NAME, column("Status", doc="Status of the job."),
        column("Completions", doc="The number of pods which reached phase Succeeded. The value increases "
               "monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed "
               "jobs."),
        column("Duration", doc="Time required to complete the job."), AGE,
        column("Containers", doc=CONTAINERS_DOC, priority=_WIDE), column("Images", doc=IMAGES_DOC, priority=_WIDE),
        column("Selector", doc="A label query over pods that should match the pod count. Normally, the system sets "
               "this field for you. More info: "
               "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
               priority=_WIDE)), _job),
    ("batch", "CronJob"): Printer((
        NAME, column("Schedule", doc="The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
        column("Timezone", doc=TIME_ZONE_DOC),
        column("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions, it does not "
               "apply to already started executions.  Defaults to false."),
        column("Active", "integer", "A list of pointers to currently running jobs."),
        column("Last Schedule", doc="Information when was the last time the job was successfully scheduled."), AGE,
        column("Containers", doc=CONTAINERS_DOC, priority=_WIDE), column("Images", doc=IMAGES_DOC, priority=_WIDE),
        column("Selector", doc="A label query over pods that should match the pod count. Normally, the system sets "
               "this field for you. More info: "
               "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
               priority=_WIDE)), _cron_job),
    ("", "Pod"): Printer((
        NAME, column("Ready", doc="The aggregate readiness state of this pod for accepting traffic."),
        column("Status", doc="The aggregate status of the containers in this pod."),
        column("Restarts", doc="The number of times the containers in this pod have been restarted and when the "
                               "last container in this pod has restarted."),
        AGE, column("IP", doc="podIP address allocated to the pod. Routable at least within the cluster. Empty if "
                              "not yet allocated.", priority=_WIDE),
        column("Node", doc="NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate "
               "for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this "
               "node becomes responsible for the lifecycle of this pod. This field should not be used to express a "
               "desire for the pod to be scheduled on a specific node. "
               "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename", priority=_WIDE),
        column("Nominated Node", doc="nominatedNodeName is set only when this pod preempts other pods on the node, "
               "but it cannot be scheduled right away as preemption victims receive their graceful termination "
               "periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may "
               "decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide "
               "to give the resources on this node to a higher priority pod that is created after preemption. As a "
               "result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
               priority=_WIDE),
        column("Readiness Gates", doc="If specified, all readiness gates will be evaluated for pod readiness. A pod "
               "is ready when all its containers are ready AND all conditions specified in the readiness gates have "
               "status equal to \"True\" More info: "
               "https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates", priority=_WIDE)), _pod),
    ("", "Event"): Printer((
        column("Last Seen", doc="The time at which the most recent occurrence of this event was recorded."),
        column("Type", doc="Type of this event (Normal, Warning), new types could be added in the future"),
        column("Reason", doc="This should be a short, machine understandable string that gives the reason for the "
               "transition into the object's current status."),
        column("Object", doc="The object that this event is about."),
        column("Subobject", doc="If referring to a piece of an object instead of an entire object, this string "
               "should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. "
               "For example, if the object reference is to a container within a pod, this would take on a value "
               "like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered "
               "the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in "
               "this pod). This syntax is chosen only to have some well-defined way of referencing a part of an "
               "object.", priority=_WIDE),
        column("Source", doc="The component reporting this event. Should be a short machine understandable string.",
               priority=_WIDE),
        column("Message", doc="A human-readable description of the status of this operation."),
        column("First Seen", doc="The time at which the event was first recorded. (Time of server receipt is in "
               "TypeMeta.)", priority=_WIDE),
        column("Count", doc="The number of times this event has occurred.", priority=_WIDE),
        column("Name", doc=NAME_DOC, priority=_WIDE, fmt="name")), _event),
    ("", "Namespace"): Printer((NAME, column("Status", doc="The status of the namespace"), AGE), _namespace),
    ("", "Node"): Printer((
        NAME, column("Status", doc="The status of the node"), column("Roles", doc="The roles of the node"), AGE,
        column("Version", doc="Kubelet Version reported by the node."),
        column("Internal-IP", doc=NODE_ADDRESSES_DOC, priority=_WIDE),
        column("External-IP", doc=NODE_ADDRESSES_DOC, priority=_WIDE),
        column("OS-Image", doc="OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 "
               "(wheezy)).", priority=_WIDE),
        column("Kernel-Version", doc="Kernel Version reported by the node from 'uname -r' (e.g. "
               "3.16.0-0.bpo.4-amd64).", priority=_WIDE),
        column("Container-Runtime", doc="ContainerRuntime Version reported by the node through runtime remote API "
               "(e.g. containerd://1.4.2).", priority=_WIDE)), _node),
    ("", "ResourceQuota"): Printer((
        NAME, AGE,
        column("Request", doc="Request represents a minimum amount of cpu/memory that a container may consume."),
        column("Limit", doc="Limits control the maximum amount of cpu/memory that a container may use independent "
               "of contention on the node.")), _resource_quota),
    ("scheduling.k8s.io", "PriorityClass"): Printer((
        NAME, column("Value", "integer", "value represents the integer value of this priority class. This is the "
                     "actual priority that pods receive when they have the name of this class in their pod spec."),
        column("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should be considered "
               "as the default priority for pods that do not have any priority class. Only one PriorityClass can be "
               "marked as `globalDefault`. However, if more than one PriorityClasses exists with their "
               "`globalDefault` field set to true, the smallest value of such global default PriorityClasses will be "
               "used as the default priority."), AGE,
        column("PreemptionPolicy", doc="preemptionPolicy is the Policy for preempting pods with lower priority. One "
               "of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.")), _priority_class),
    ("coordination.k8s.io", "Lease"): Printer((
        NAME, column("Holder", doc="holderIdentity contains the identity of the holder of a current lease. If "
                     "Coordinated Leader Election is used, the holder identity must be equal to the elected "
                     "LeaseCandidate.metadata.name field."), AGE),
        _lease),
    ("", "ConfigMap"): Printer((NAME, column("Data", doc=CONFIG_MAP_DATA_DOC), AGE), _config_map),
    ("", "Secret"): Printer((
        NAME, column("Type", doc="Used to facilitate programmatic handling of secret data. More info: "
                     "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"),
        column("Data", doc=SECRET_DATA_DOC), AGE), _secret),
    ("", "ServiceAccount"): Printer((
        NAME, column("Secrets", doc=SA_SECRETS_DOC), AGE), _service_account),
    ("policy", "PodDisruptionBudget"): Printer((
        NAME, column("Min Available", doc="The minimum number of pods that must be available."),
        column("Max Unavailable", doc="The maximum number of pods that may be unavailable."),
        column("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
        AGE), _pdb),
}


def printer_for(group: str, kind: str) -> Printer | None:
    return PRINTERS.get((group, kind))
