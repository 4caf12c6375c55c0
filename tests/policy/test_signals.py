"""fold(): the alerts of one notification on one workload become one Signal."""

from __future__ import annotations

import pytest

from reactor.core.model import Signal
from reactor.policy import fold
from tests.policy.policy_builders import alert

T1, T2 = "2025-03-01T11:00:00", "2025-03-01T11:05:00"
K1, K2 = "2025-03-01T11:00:00+00:00", "2025-03-01T11:05:00+00:00"


@pytest.mark.parametrize(
    ("names", "chosen"),
    [
        (("GPUIdle", "GPUUnderutilized"), "GPUUnderutilized"),
        (("GPUUnderutilized", "GPUMemorySaturated"), "GPUMemorySaturated"),
        (("GPUMemorySaturated", "GPUSaturated"), "GPUSaturated"),
        (("GPUSaturated", "GPUMetricsMissing", "GPUIdle"), "GPUMetricsMissing"),
        (("SomethingElse", "GPUIdle"), "GPUIdle"),
        (("Zeta", "Alpha"), "Alpha"),
    ],
    ids=["underutilized-over-idle", "memory-over-underutilized", "saturated-over-memory", "missing-over-all",
         "known-over-unknown", "unknown-by-name"],
)
def test_precedence(names, chosen):
    alerts = [alert(n, fingerprint=f"fp-{i}") for i, n in enumerate(names)]
    assert fold(alerts).alert == chosen


def test_a_firing_name_beats_a_resolved_one_of_higher_precedence():
    signal = fold([alert("GPUSaturated", status="resolved"), alert("GPUUnderutilized", fingerprint="fp-b", value=0.1)])
    assert (signal.alert, signal.status, signal.keys) == ("GPUUnderutilized", "firing", (("fp-b", K1),))


def test_full_signal_of_two_pods():
    alerts = [
        alert(fingerprint="fp-b", starts=T2, value=0.25, pod="trainer-2"),
        alert(fingerprint="fp-a", starts=T1, value=0.10, pod="trainer-1"),
        alert("GPUIdle", fingerprint="fp-c", value=0.0, pod="trainer-3"),
    ]
    assert fold(alerts) == Signal(
        alert="GPUUnderutilized", status="firing", keys=(("fp-a", K1), ("fp-b", K2)), container="server",
        value=0.25, pods=("trainer-1", "trainer-2"), starts_at=K1, fingerprint="fp-a",
    )


def test_resolved_when_nothing_fires_and_keeps_all_keys():
    signal = fold([alert(status="resolved", fingerprint="fp-b", starts=T2), alert(status="resolved", starts=T1)])
    assert (signal.status, signal.keys, signal.fingerprint) == ("resolved", (("fp-a", K1), ("fp-b", K2)), "fp-a")


def test_firing_signal_ignores_resolved_alerts_of_the_same_name():
    # The resolved one's key would make the new firing look already applied; its value is stale.
    signal = fold([alert(status="resolved", value=0.5), alert(fingerprint="fp-b", starts=T2, value=0.1)])
    assert (signal.keys, signal.value, signal.fingerprint) == ((("fp-b", K2),), 0.1, "fp-b")


@pytest.mark.parametrize(
    ("containers", "expected"),
    [(("server", "server"), "server"), (("server", "encoder"), "server"), ((None, "encoder"), "encoder"), ((None, None), None)],
    ids=["agree", "disagree-first", "first-named", "none"],
)
def test_container(containers, expected):
    alerts = [alert(fingerprint=f"fp-{i}", container=c) for i, c in enumerate(containers)]
    assert fold(alerts).container == expected


def test_no_value_when_none_measured():
    assert fold([alert(value=None), alert(fingerprint="fp-b", value=None)]).value is None


def test_duplicate_alerts_fold_to_one_key():
    assert fold([alert(), alert()]).keys == (("fp-a", K1),)


def test_empty_is_a_programming_error():
    with pytest.raises(ValueError):
        fold([])
