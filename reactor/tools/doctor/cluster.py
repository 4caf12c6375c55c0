"""Doctor checks that ask the Kubernetes API: the server's version and the capabilities the policy needs, the
reactor's RBAC per allowed namespace, the ladder's PriorityClasses, quota and LimitRange.

Reads only, through the gateway (`reactor.cluster.kube`, the one module that talks to Kubernetes). RBAC is asked
with SelfSubjectAccessReview, as the reactor's ServiceAccount when the gateway impersonates it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reactor.cluster.capabilities import Capabilities
from reactor.config.settings import Settings
from reactor.core.errors import ReactorError
from reactor.tools.doctor.report import Check, failing, ok, warning

if TYPE_CHECKING:  # types only: importing the client takes seconds (`reactor --help` must not wait)
    from reactor.cluster.kube import KubeGateway

# Every call the reactor makes: (apiGroup, resource, verb). tests/doctor checks this equals the grants that
# tests/deploy/test_rbac_proof.py proves needed.
NAMESPACED: tuple[tuple[str, str, str], ...] = (
    ("", "pods", "get"), ("", "pods", "list"), ("", "limitranges", "list"), ("", "resourcequotas", "list"),
    ("", "events", "create"), ("", "events", "patch"), ("apps", "replicasets", "get"), ("apps", "deployments", "get"),
    ("apps", "deployments", "patch"), ("apps", "statefulsets", "get"), ("apps", "statefulsets", "patch"),
    ("batch", "jobs", "get"), ("batch", "cronjobs", "get"), ("batch", "cronjobs", "patch"),
    ("autoscaling", "horizontalpodautoscalers", "list"),
)
# Only when the policy raises CPU on running pods (Policy.resizes_pods_in_place).
CPU_IN_PLACE: tuple[tuple[str, str, str], ...] = (("", "pods/resize", "patch"),)
CLUSTER: tuple[tuple[str, str, str], ...] = (("scheduling.k8s.io", "priorityclasses", "list"),)
# Kueue-admitted workloads: the LocalQueue in the namespace, its ClusterQueue and the WorkloadPriorityClasses.
KUEUE_NAMESPACED: tuple[tuple[str, str, str], ...] = (("kueue.x-k8s.io", "localqueues", "get"),)
KUEUE_CLUSTER: tuple[tuple[str, str, str], ...] = (("kueue.x-k8s.io", "clusterqueues", "get"),
                                                   ("kueue.x-k8s.io", "workloadpriorityclasses", "list"))
# The verifier's Lease, in verify.leaseNamespace: get/update on it by name (verify.leaseName), create on leases.
LEASE: tuple[tuple[str, str, str], ...] = (("coordination.k8s.io", "leases", "get"),
                                           ("coordination.k8s.io", "leases", "create"),
                                           ("coordination.k8s.io", "leases", "update"))
# What the read cache adds (kube.watchCache): list+watch of the cached kinds (test_rbac_proof.CACHE_NEEDED).
CACHE_NAMESPACED: tuple[tuple[str, str, str], ...] = tuple(
    (g, r, v) for g, r in (("apps", "replicasets"), ("apps", "deployments"), ("apps", "statefulsets"),
                           ("batch", "jobs"), ("batch", "cronjobs")) for v in ("list", "watch")
) + (("", "limitranges", "watch"), ("", "resourcequotas", "watch"),
     ("autoscaling", "horizontalpodautoscalers", "watch"))
CACHE_CLUSTER: tuple[tuple[str, str, str], ...] = (("scheduling.k8s.io", "priorityclasses", "watch"),)
BOUNDS_FIX = ("growth is then bounded only by the policy's gpus.max/replicas.max: apply deploy/base "
              "(or the gpu-reactor-base chart) to the namespace")
RBAC_FIX = "bind ClusterRole gpu-reactor-workloads there (chart: list it in policy.namespaces.allow)"

if TYPE_CHECKING:
    from reactor.cluster.kube import KubeGateway


IN_PLACE_FIX = ("upgrade to Kubernetes 1.33+ (or turn InPlacePodVerticalScaling on), or set cpu.applyTo: template "
                "(or both): the raise then replaces the pods through the rollout")


def capabilities(kube: KubeGateway, settings: Settings) -> list[Check]:
    """The server's version and what it serves, asked of it (discovery, as the reactor asks at start), then each
    capability the policy needs: in-place resize (cpu.applyTo pods or both, with an in-place strategy), scoped
    quotas (a priorityLadder moves pods between PriorityClass-scoped quotas), sidecars (reported: the reactor and
    the quota count a sidecar's resources only where the server keeps it one)."""
    found = kube.discover()
    offered = [name for name, served in _offers(found) if served]
    missing = [name for name, served in _offers(found) if not served]
    summary = f"serves {', '.join(offered) or 'none of them'}" + (f"; not {', '.join(missing)}" if missing else "")
    checks = [ok("kubernetes", f"API server {found.version}: {summary}")]
    policy = settings.policy
    if not policy.resizes_pods_in_place:
        checks.append(ok("in-place resize", f"not needed: cpu.applyTo {policy.cpu_apply_to}, or no in-place strategy"))
    elif found.in_place_resize:
        checks.append(ok("in-place resize", f"pods/resize served: cpu.applyTo {policy.cpu_apply_to} raises CPU and "
                                            "memory on the running pods"))
    elif policy.cpu_apply_to == "pods":
        checks.append(failing("in-place resize", f"cpu.applyTo pods is refused (in-place-unavailable): "
                                                 f"{found.in_place_refusal()}", IN_PLACE_FIX))
    else:
        checks.append(warning("in-place resize", f"{found.version} serves no pods/resize: cpu.applyTo both goes to "
                                                 "the template alone (the pods are replaced)", IN_PLACE_FIX))
    if policy.priority_ladder and not found.scoped_quotas:
        checks.append(failing("scoped quotas", f"{found.version}: ResourceQuota scopeSelector (PriorityClass) not "
                                               "known to be served; the priority ladder's quotas cannot be told apart",
                              "Kubernetes 1.17+ serves it: check the server answers /version"))
    elif policy.priority_ladder:
        checks.append(ok("scoped quotas", "PriorityClass-scoped ResourceQuotas served (the priority ladder's quotas)"))
    if found.sidecars:
        checks.append(ok("sidecars", "init containers with restartPolicy Always run beside the containers"))
    else:
        checks.append(warning("sidecars", f"{found.version} drops an init container's restartPolicy Always (sidecars "
                                          "are 1.29+): such a container runs as an ordinary init container",
                              "upgrade to Kubernetes 1.29+ before deploying sidecars"))
    return checks


def _offers(found: Capabilities) -> list[tuple[str, bool]]:
    return [("in-place resize", found.in_place_resize), ("scoped quotas", found.scoped_quotas),
            ("sidecars", found.sidecars)]


def _denied(kube: KubeGateway, grants: tuple[tuple[str, str, str], ...], namespace: str,
            name: str = "") -> list[str]:
    return [f"{verb} {resource}" for group, resource, verb in grants
            if not kube.access_review(verb=verb, group=group, resource=resource, namespace=namespace,
                                      name="" if verb == "create" else name)]


def _lease(kube: KubeGateway, settings: Settings, who: str) -> list[Check]:
    """The verifier's Lease (verify.leaseName): without it no replica verifies rollouts."""
    return _lease_access(kube, who, settings.server.lease_namespace, settings.server.lease_name,
                         check="rbac lease", use="hold the verifier Lease", without="no replica verifies rollouts")


def _ledger(kube: KubeGateway, settings: Settings, who: str) -> list[Check]:
    """The state ledger's Lease (state.ledgerName): written before every change, so without it nothing is written."""
    return _lease_access(kube, who, settings.server.lease_namespace, settings.server.state_ledger_name,
                         check="rbac ledger", use="keep the state ledger in Lease",
                         without="the ledger is written before every change, so no change is made")


def _lease_access(kube: KubeGateway, who: str, namespace: str | None, name: str | None, *, check: str, use: str,
                  without: str) -> list[Check]:
    """Whether `who` may get, create and update the Lease `namespace/name` (none configured: nothing to check)."""
    if namespace is None or name is None:
        return []
    denied = _denied(kube, LEASE, namespace, name)
    if denied:
        return [failing(check, f"{who} may not: {', '.join(denied)} (Lease {namespace}/{name})",
                        f"apply deploy/reactor/rbac-lease.yaml (the chart grants it): {without}")]
    return [ok(check, f"{who} may {use} {namespace}/{name}")]


def operator_grants(settings: Settings) -> tuple[tuple[str, str, str], ...]:
    """get/patch on the resources of the enabled adapters (adapters.builtin and adapters.custom), get on what
    the resolver reads on the way to them (KServe's serverless mode: Knative's Revisions, Configurations and
    Services), and get/create/patch on the Leases where an InferenceService's state lives."""
    changed = tuple((a.group, a.plural, verb) for a in settings.adapters for verb in ("get", "patch"))
    read = tuple((group, plural, "get") for a in settings.adapters for group, plural in a.reads)
    # The reactor's state for a kind whose operator copies annotations into its pods (KServe): a Lease it owns.
    state = tuple(("coordination.k8s.io", "leases", verb) for verb in ("get", "create", "patch")
                  if any(a.state_apart for a in settings.adapters))
    return changed + read + state


def namespaced_grants(settings: Settings) -> tuple[tuple[str, str, str], ...]:
    """Every namespaced call the reactor makes under this policy."""
    cpu = CPU_IN_PLACE if settings.policy.resizes_pods_in_place else ()
    return NAMESPACED + cpu + KUEUE_NAMESPACED + operator_grants(settings)


def rbac(kube: KubeGateway, settings: Settings, who: str) -> list[Check]:
    checks = []
    cached = settings.kube.watch_cache
    grants = namespaced_grants(settings) + (CACHE_NAMESPACED if cached else ())
    for namespace in settings.policy.allow:
        name = f"rbac {namespace}"
        if namespace != "*" and kube.namespace_exists(namespace) is False:
            checks.append(failing(name, f"namespace {namespace} does not exist",
                                  "create it, or remove it from policy.namespaces.allow"))
            continue
        denied = _denied(kube, grants, namespace)
        if denied:
            checks.append(failing(name, f"{who} may not: {', '.join(denied)}", RBAC_FIX))
        else:
            checks.append(ok(name, f"{who} may make all {len(grants)} calls the reactor makes"))
    denied = _denied(kube, CLUSTER + KUEUE_CLUSTER + (CACHE_CLUSTER if cached else ()), "")
    if denied:
        checks.append(failing("rbac cluster", f"{who} may not: {', '.join(denied)}",
                              "bind ClusterRole gpu-reactor-priorityclasses with a ClusterRoleBinding"))
    else:
        checks.append(ok("rbac cluster", f"{who} may list{' and watch' if cached else ''} priorityclasses and "
                                         "read Kueue's queues and classes"))
    return checks + _lease(kube, settings, who) + _ledger(kube, settings, who)


def priority_classes(kube: KubeGateway, settings: Settings) -> Check:
    ladder = settings.policy.priority_ladder
    if not ladder:
        return ok("priority-classes", "no priorityLadder: the reactor never changes priorities")
    try:
        classes = kube.list_priority_classes()
        present = {pc["metadata"]["name"] for pc in classes}
    except ReactorError as e:
        return failing("priority-classes", f"cannot list PriorityClasses: {e}", "see rbac cluster")
    missing = [c for c in ladder if c not in present]
    if missing:
        return failing("priority-classes", f"the ladder names classes that do not exist: {', '.join(missing)}",
                       "create them (deploy/base, or the gpu-reactor-base chart) or change policy.priorityLadder")
    return ok("priority-classes", f"all {len(ladder)} ladder classes exist: {', '.join(ladder)}")


def bounds(kube: KubeGateway, settings: Settings) -> list[Check]:
    gpu = settings.policy.gpu_resource
    checks = []
    for namespace in settings.policy.allow:
        if namespace == "*" or kube.namespace_exists(namespace) is False:
            continue  # said once, by `rbac NAMESPACE`
        try:
            quota = [q for q in kube.list_objects("ResourceQuota", namespace)
                     if f"requests.{gpu}" in q["spec"].get("hard", {})]
            limits = [lr for lr in kube.list_objects("LimitRange", namespace) if _limits(lr, gpu)]
        except ReactorError as e:
            checks.append(failing(f"bounds {namespace}", f"cannot read quota/LimitRange: {e}", RBAC_FIX))
            continue
        missing = [what for what, found in (("ResourceQuota", quota), ("LimitRange", limits)) if not found]
        if missing:
            checks.append(warning(f"bounds {namespace}", f"no {' and no '.join(missing)} for {gpu}", BOUNDS_FIX))
        else:
            checks.append(ok(f"bounds {namespace}", f"ResourceQuota and LimitRange bound {gpu}"))
    return checks


def _limits(limit_range: dict[str, object], gpu: str) -> bool:
    spec = limit_range.get("spec") or {}
    assert isinstance(spec, dict)
    return any(gpu in (item.get("max") or {}) for item in spec.get("limits") or [])
