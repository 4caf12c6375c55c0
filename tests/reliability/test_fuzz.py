"""Hostile and broken input, fuzzed with hypothesis through the webhook (Flask test client, real gateway
over HTTP to the embedded cluster).

Whatever arrives: never a 5xx, never a write to the cluster, and a clear 4xx that names the field of a broken
envelope — or a 200 whose outcomes are all skips, one per alert, in order: a malformed alert is its own
`invalid-alert` naming its field, and the well-formed alerts beside it are decided (they name nothing real).
The cluster holds real workloads in an allowed namespace and in denied ones; no fuzzed alert names
a pod that exists, so any write at all is a failure.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reactor.tools.payloads import AlertSpec, notification
from reactor_sim import SimCluster
from tests.reliability.conftest import LONG
from tests.reliability.figures import FIGURES
from tests.reliability.harness import deployment_doc, namespace_docs, writes
from tests.support import HERE, TOKEN, Reactor, build_reactor, make_settings

EXAMPLES = 2000 if LONG else 200
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not LONG,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
NS = "ml-workloads"
ANSWERS = {200, 400, 413, 415}

# What a hostile sender puts in names: paths, encodings, selector syntax, control characters,
# lookalikes, system namespaces, wildcards, and sizes.
HOSTILE = [
    "../", "..", ".", "../../api/v1/namespaces/kube-system/pods", "..%2F..%2Fsecrets", "%2F", "a%2Fb", "a/b",
    "llm-inference/../trainer", "x?labelSelector=app%3Dllm-inference", "x#fragment", "app=llm-inference",
    "app!=x", "a,b", "a=b,c!=d", "in (a,b)", "x\ny", "x\r\nX-Injected: 1", "\x00", "\t", " ", "", "*",
    "kube-system", "kube-public", "kube-node-lease", "default", "other-team", "ML-WORKLOADS", " ml-workloads",
    "ml-workloads ", "ml\u2010workloads", "ml-workloads\u200b", "мl-workloads", "ml-workloads.", "-ml", "ml-",
    "a" * 64, "a" * 254, "a" * 4096, "a" * 4097, "ghost", "ghost-7d9f8b6c5-x2x2z", "ghost-0",
    "💥", "\ud800", "\\", "'", '"', "${jndi:ldap://x}", "{{7*7}}", "<script>",
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40)
    | st.sampled_from(HOSTILE),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=20), children, max_size=6),
    max_leaves=30,
)
NAME = st.sampled_from(HOSTILE) | st.text(max_size=70) | st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z")
TIME = (st.sampled_from(["0001-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-23:59",
                         "9999-12-31T23:59:59.999999999Z", "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z",
                         "2026-01-01T24:00:00Z", "2026-01-01T00:00:60Z", "2026-01-01T00:00:00+24:00",
                         "2026-01-01 00:00:00Z", "2026-01-01T00:00:00", "", "now"])
        | st.from_regex(r"\A\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,12})?(Z|[+-]\d{2}:\d{2})\Z") | JSON)
LABEL_KEYS = ["alertname", "namespace", "pod", "container", "exported_namespace", "exported_pod", "exported_container"]


class Counter(logging.Handler):
    """Cases tried, and 5xx on bad input counted from every exception, not only from answers seen.

    An answer of 500 or more; an exception that left the handler (the test client raises it: in production it is a
    500); and a record logged with a traceback (Flask's "Exception on /alerts", the engine's internal-error) —
    each case counts once, however many of these it shows.
    """

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.cases = 0
        self.bad_5xx = 0
        self.tracebacks: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is not None:
            self.tracebacks.append(f"{record.name}: {record.getMessage()}: {record.exc_info[1]!r}")


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Reactor, Counter]]:
    sim = SimCluster().start()
    sim.load_manifests((HERE / "fixtures" / "cluster.yaml").read_text())
    sim.apply(namespace_docs("team-x") + [deployment_doc("other-team", "victim"), deployment_doc("kube-system", "dcgm"),
                                          deployment_doc("team-x", "victim")])
    sim.settle()
    token = tmp_path_factory.mktemp("fuzz") / "token"
    token.write_text(TOKEN)
    reactor = build_reactor(sim, make_settings(token))
    counter = Counter()
    logging.getLogger().addHandler(counter)
    try:
        yield reactor, counter
    finally:
        logging.getLogger().removeHandler(counter)
        FIGURES.add("fuzz /alerts", fuzz_cases=counter.cases, bad_input_5xx=counter.bad_5xx)
        reactor.service.kube.close()
        sim.stop()


def post(target: tuple[Reactor, Counter], data: bytes, content_type: str | None = "application/json",
         token: str | None = TOKEN, answers: set[int] = ANSWERS) -> Any:
    reactor, counter = target
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if content_type is not None:
        headers["Content-Type"] = content_type
    before = writes(reactor.sim)
    logged = len(counter.tracebacks)
    counter.cases += 1
    try:
        response = reactor.client.post("/alerts", data=data, headers=headers)
    except Exception as e:
        counter.bad_5xx += 1
        raise AssertionError(f"an exception left the webhook (a 500 in production): {e!r} on {data[:300]!r}") from e
    tracebacks = counter.tracebacks[logged:]
    counter.bad_5xx += response.status_code >= 500 or bool(tracebacks)
    assert response.status_code < 500, (response.status_code, response.get_data()[:300], data[:300])
    assert not tracebacks, (tracebacks, data[:300])
    assert writes(reactor.sim) == before, f"a hostile input wrote to the cluster: {data[:300]!r}"
    assert response.status_code in answers, response.status_code
    body = response.get_json()
    assert isinstance(body, dict) and body, response.get_data()[:200]
    if response.status_code == 400:
        assert body["error"].startswith("invalid Alertmanager payload: ") and body["field"], body
    return response


def check_skipped(response: Any, sent: Any) -> None:
    """A 200 accounts for every alert sent, in order, and acted on none of them."""
    if response.status_code != 200:
        return
    outcomes = response.get_json()["outcomes"]
    assert len(outcomes) == len(sent["alerts"])
    assert [o["fingerprint"] for o in outcomes] == [_fingerprint(a) for a in sent["alerts"]]
    assert {o["result"] for o in outcomes} <= {"skipped"}, outcomes


def _fingerprint(alert: Any) -> str:
    """The fingerprint an outcome names: the alert's, or "" for a malformed alert without a string one."""
    found = alert.get("fingerprint") if isinstance(alert, dict) else None
    return found if isinstance(found, str) else ""


def check_invalid_alone(response: Any, sent: Any, index: int, name: str) -> None:
    """The alert at `index` is `invalid-alert` naming `name` (or a field inside it); the others are decided."""
    assert response.status_code == 200, (name, response.get_json())
    check_skipped(response, sent)
    outcomes = response.get_json()["outcomes"]
    bad = outcomes[index]
    assert bad["reason"] == "invalid-alert", (name, bad)
    named = bad["detail"].removeprefix("invalid alert: ").split(":", 1)[0]
    assert named == name or named.startswith((name + ".", name + "[")), (name, bad)
    assert all(o["reason"] != "invalid-alert" for i, o in enumerate(outcomes) if i != index), outcomes


def encode(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass")


def base() -> dict[str, Any]:
    """A valid notification on pods that do not exist: one in the allowed namespace, one in a denied one."""
    return notification([AlertSpec("GPUUnderutilized", NS, "ghost-7d9f8b6c5-x2x2z", "server", 0.1, 4),
                         AlertSpec("GPUIdle", "other-team", "victim-5b6c7d8e9f-abcde", "main", 0.0, 4)])


@FUZZ
@given(doc=JSON)
def test_any_json_at_all(target: tuple[Reactor, Counter], doc: Any) -> None:
    post(target, encode(doc))


@FUZZ
@given(data=st.data())
def test_a_valid_notification_with_one_part_broken(target: tuple[Reactor, Counter], data: st.DataObject) -> None:
    doc = base()
    node: Any = doc
    path = data.draw(st.lists(st.integers(0, 20), min_size=1, max_size=4))
    for step in path[:-1]:  # walk down to a random container
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys or not isinstance(node[keys[step % len(keys)]], (dict, list)):
            break
        node = node[keys[step % len(keys)]]
    keys = list(node) if isinstance(node, dict) else list(range(len(node)))
    if keys:
        key = keys[path[-1] % len(keys)]
        if data.draw(st.booleans()):
            del node[key]
        else:
            node[key] = data.draw(JSON)
    response = post(target, encode(doc))
    if response.status_code == 200:
        check_skipped(response, doc)


# Every JSON type, a few values of each: what `test_every_field_takes_every_json_type` puts in each field in turn.
EVERY_TYPE = [None, False, True, 0, 7, -1, 1.5, 1e308, "", "x", "firing", [], ["x"], {}, {"k": "v"}, {"k": 1}]
_TOP_STRINGS = {"version", "groupKey", "receiver", "status"}
_MAPS = {"groupLabels", "commonLabels", "commonAnnotations"}
_ALERT_STRINGS = {"status", "startsAt", "endsAt", "fingerprint"}


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {int: "integer", float: "number", str: "string", list: "list", dict: "object"}[type(value)]


def accepted(path: tuple[str | int, ...]) -> set[str]:
    """The JSON types the v4 payload allows at `path` (Alertmanager's template.Data, notify/webhook's Message):
    any other type there must be a 400 naming the field."""
    top = path[0]
    if len(path) == 1:
        if top in _TOP_STRINGS:
            return {"string"}
        return {"externalURL": {"string", "null"}, "truncatedAlerts": {"integer"}, "alerts": {"list"}}.get(
            str(top), {"object"} if top in _MAPS else set())
    if top in _MAPS:
        return {"string"}
    if len(path) == 2:
        return {"object"}  # alerts[i]
    key = path[2]
    if len(path) == 3:
        if key in _ALERT_STRINGS:
            return {"string"}
        return {"generatorURL": {"string", "null"}, "labels": {"object"}, "annotations": {"object"}}[str(key)]
    return {"string"}  # a label's or an annotation's value


def field_name(path: tuple[str | int, ...]) -> str:
    """The field as the parser names it: `alerts[1].labels.pod`."""
    name = ""
    for step in path:
        name += f"[{step}]" if isinstance(step, int) else (f".{step}" if name else step)
    return name


def every_path(node: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        yield (*path, key)
        yield from every_path(child, (*path, key))


def _at(doc: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc


@pytest.mark.parametrize("path", list(every_path(base())), ids=field_name)
def test_every_field_takes_every_json_type(target: tuple[Reactor, Counter], path: tuple[str | int, ...]) -> None:
    """Each field of a valid notification (top level, per alert, each label's and annotation's value) in turn gets
    each JSON type — and, where it may be left out, nothing. In the envelope, a type the field does not take is a 400
    naming that field exactly; one it takes is a 200 (every alert skipped: no pod named exists) or a 400 naming the
    field or a field inside it. In an alert, a type or value it does not take is that alert's own `invalid-alert`
    naming the field (or one inside it), answered 200 with the other alert decided. Never a 5xx."""
    name = field_name(path)
    ok = accepted(path)
    tried: list[tuple[Any, int, str]] = []
    for value in [*EVERY_TYPE, _ABSENT]:
        if value is _ABSENT and isinstance(path[-1], int):
            continue  # an alert taken out of the list is another valid notification, not a missing field
        doc = base()
        parent = _at(doc, path[:-1])
        if value is _ABSENT:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
        response = post(target, encode(doc))
        named = (response.get_json() or {}).get("field", "")
        tried.append((value, response.status_code, named))
        if path[0] == "alerts" and len(path) >= 2:  # inside one alert: never a 400, that alert's own outcome
            index = int(path[1])
            outcome = response.get_json()["outcomes"][index] if response.status_code == 200 else {}
            if (value is not _ABSENT and json_type(value) not in ok) or outcome.get("reason") == "invalid-alert":
                check_invalid_alone(response, doc, index, name)
            else:
                check_skipped(response, doc)
        elif value is not _ABSENT and json_type(value) not in ok:
            assert (response.status_code, named) == (400, name), (name, value, response.get_json())
        elif response.status_code == 400:
            assert named == name or named.startswith((name + ".", name + "[")), (name, value, response.get_json())
        else:
            check_skipped(response, doc)
    assert tried and all(code in (200, 400) for _, code, _ in tried), tried


_ABSENT = object()


@FUZZ
@given(labels=st.dictionaries(st.sampled_from(LABEL_KEYS), NAME, min_size=1),
       alertname=st.sampled_from(["GPUUnderutilized", "GPUIdle", "GPUSaturated", "GPUMemorySaturated"]) | NAME,
       status=st.sampled_from(["firing", "resolved"]))
@example(labels={"namespace": NS, "pod": "a" * 4097}, alertname="GPUIdle", status="firing")
@example(labels={"namespace": NS, "exported_namespace": "kube-system", "pod": "x", "exported_pod": "dcgm-0"},
         alertname="GPUIdle", status="firing")
def test_hostile_names_are_refused_or_skipped(target: tuple[Reactor, Counter], labels: dict[str, str], alertname: str,
                                              status: str) -> None:
    labels = {**labels, "alertname": alertname}
    doc = notification([AlertSpec("GPUIdle", "", "", "", 0.1, 4, status=status)])
    alert = doc["alerts"][0]
    alert["labels"] = labels
    alert["fingerprint"] = hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]
    response = post(target, encode(doc))
    if response.status_code == 200:
        check_skipped(response, doc)


@FUZZ
@given(starts=TIME, ends=TIME, value=JSON | st.sampled_from(["nan", "inf", "-1", "1e309", "0x10", "1_0", " 1", "1e6", "1e7"]),
       gpus=JSON | st.sampled_from(["1.5", "1e6", "1000001", "-0", "2 "]))
@example(starts="9999-12-31T23:59:59-23:59", ends="0001-01-01T00:00:00Z", value="0.1", gpus="4")
@example(starts="2026-01-01T00:00:00Z", ends="0001-01-01T00:00:00+01:00", value="0.1", gpus="4")
def test_hostile_times_and_numbers(target: tuple[Reactor, Counter], starts: Any, ends: Any, value: Any, gpus: Any) -> None:
    doc = base()
    for alert in doc["alerts"]:
        alert.update(startsAt=starts, endsAt=ends)
        alert["annotations"].update(value=value, gpus=gpus)
    response = post(target, encode(doc))
    if response.status_code == 200:
        check_skipped(response, doc)


@FUZZ
@given(raw=st.binary(max_size=2000) | st.sampled_from([b"\xff\xfe{}", b'{"version": "4", "x": "\xc3\x28"}', b"\xed\xa0\x80",
                                                        b"[" * 50_000 + b"]" * 50_000, b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
                                                        b"1" * 5000, b"", b"null", b"\x00" * 100]),
       content_type=st.sampled_from(["application/json", "application/json; charset=latin-1", "text/plain",
                                     "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]))
def test_raw_bytes_and_content_types(target: tuple[Reactor, Counter], raw: bytes, content_type: str | None) -> None:
    post(target, raw, content_type)


@pytest.mark.parametrize("over", [1, 1 << 20])
def test_bodies_over_the_limit_are_413(target: tuple[Reactor, Counter], over: int) -> None:
    doc = base()
    doc["commonAnnotations"]["padding"] = "x" * (target[0].service.engine.settings.server.max_body_bytes + over)
    response = post(target, encode(doc))
    assert response.status_code == 413


def test_one_bad_alert_among_many_is_its_own_outcome(target: tuple[Reactor, Counter]) -> None:
    doc = notification([AlertSpec("GPUIdle", NS, f"ghost-{i}", "main") for i in range(1000)])
    doc["alerts"][734]["startsAt"] = "yesterday"
    response = post(target, encode(doc))
    check_invalid_alone(response, doc, 734, "alerts[734].startsAt")


@pytest.mark.parametrize("value", ["-1", "abc", "Inf", "+Inf", "1e309", "-0.5"])
def test_a_bad_value_costs_its_own_alert_only(target: tuple[Reactor, Counter], value: str) -> None:
    """One tenant's `value: "-1"` used to make the whole notification a 400, which Alertmanager never retries: the
    other team's alert in the same group was lost."""
    doc = base()
    doc["alerts"][0]["annotations"]["value"] = value
    response = post(target, encode(doc))
    check_invalid_alone(response, doc, 0, "alerts[0].annotations.value")


def test_without_the_token_nothing_is_even_parsed(target: tuple[Reactor, Counter]) -> None:
    for raw in (b"{not json", encode(base()), b"x" * (2 << 20)):
        assert post(target, raw, token=None, answers={401}).status_code == 401
        assert post(target, raw, token=TOKEN[:-1] + "x", answers={401}).status_code == 401
