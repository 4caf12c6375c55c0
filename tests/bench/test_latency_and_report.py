"""The latency run acts and times each run; the report renders what the bench measured."""

from __future__ import annotations

import json
from pathlib import Path

from bench.latency import run_latency
from bench.report import marginal_us, render
from bench.verify_latency import run_verify_latency, verify_workload
from reactor_sim import SimCluster


def test_latency_runs_act_on_their_own_deployment_and_time_the_api_calls(small_sim: SimCluster, tmp_path: Path) -> None:
    result = run_latency(small_sim, tmp_path, "latency-token", runs=3)
    assert result["runs"] == 3
    assert result["api_calls_to_effect"] >= 3  # at least pod, owner, patch
    assert 0 < result["effect_p50_ms"] <= result["answer_p99_ms"]
    assert 0 < result["api_share_p50"] <= 1
    for i in range(3):
        ns, name = f"latency-{i}", f"svc-{i:03d}"
        limits = small_sim.get("deployments", ns, name)["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == "1"
    assert (tmp_path / "latency.log").read_text().count('"msg": "decision"') >= 3


def test_verify_latency_runs_follow_each_rollout_until_verified(small_sim: SimCluster, tmp_path: Path) -> None:
    result = run_verify_latency(small_sim, tmp_path, "verify-token", runs=2)
    assert result["runs"] == 2
    assert 0 < result["rolled_out_p50_ms"] <= result["verified_p50_ms"] <= result["verified_p99_ms"]
    for i in range(2):
        obj = small_sim.get("deployments", *verify_workload(i))
        assert json.loads(obj["metadata"]["annotations"]["gpu-reactor.io/verification"])["result"] == "verified"
        assert obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert obj["status"]["updatedReplicas"] == obj["status"]["readyReplicas"] == 1
    lease = small_sim.get("leases", "gpu-reactor", "bench-verify-latency")
    assert json.loads(lease["metadata"]["annotations"]["gpu-reactor.io/verifying"]) == []


def _load(**kw: float) -> dict[str, float]:
    return {"requests": 10, "errors": 0, "rps": kw.get("rps", 100.0), "p50_ms": 1.0, "p99_ms": 2.0,
            "cpu_us_per_request": kw.get("cpu", 100.0), "cpu_us_per_alert": 1.0, "codes": {"200": 10},
            "api_per_notification": 3.0, "switches_per_request": kw.get("switches", 10.0)}


def test_report_renders_every_section_and_judges_the_targets() -> None:
    webhook = {size: {"generator": _load(rps=5000), "echo": _load(rps=1000, cpu=300 + 10 * int(size)),
                      "reactor": _load(rps=800, cpu=500 + 20 * int(size), switches=17.5)}
               for size in ("1", "100", "1000")}
    results = {
        "webhook": webhook, "setup_s": 5,
        "storm": {"alerts": 10000, "pods": 1000, "workloads": 50, "workloads_changed": 50,
                  "workloads_budget_limited": 0, "requests": 126, "reads": 26, "writes": 100, "patches": 50,
                  "seconds": 2.0, "alerts_per_s": 5000.0, "default_limiter_s": 4.3,
                  "by_resource": {"patch deployments": 50, "create events": 50, "list pods": 5}},
        "naive": {"requests": 2005, "prometheus_queries": 1000, "by_resource": {"patch pods": 1000, "list pods": 5},
                  "patch_codes": {"422": 1000}, "seconds": 3.0},
        "latency": {"runs": 200, "api_calls_to_effect": 4.0, "effect_p50_ms": 3.0, "effect_p99_ms": 9.0,
                    "answer_p50_ms": 4.0, "answer_p99_ms": 11.0, "api_share_p50": 0.7, "api_share_mean": 0.72},
        "cache": {"startup_lists": 122, "startup_watches": 121, "mb_per_1000": 7.5, "objects": 534,
                  "by_kind": {"Deployment": 250, "ReplicaSet": 250, "Job": 0}},
        "verify_latency": {"runs": 20, "controller_round_s": 0.02, "pass_s": 0.01, "default_interval_s": 15.0,
                           "rolled_out_p50_ms": 280.0, "rolled_out_p99_ms": 380.0, "verified_p50_ms": 320.0,
                           "verified_p99_ms": 430.0, "detect_p50_ms": 35.0, "detect_p99_ms": 68.0},
        "memory": {"idle_mb": 80.0, "after_storm_mb": 120.0, "after_alerts": 100000, "after_half_mb": 124.0,
                   "after_alerts_mb": 125.0},
        "meta": {"date": "today", "commit": "abc", "cpus": 2, "python": "3.11", "seconds": 100, "threads": 4},
    }
    assert marginal_us(webhook, "reactor") == 20.0
    text = render(json.loads(json.dumps(results)))
    assert "reactor / echo" in text and "0.80" in text
    assert "switches/req" in text and "17.5" in text
    assert "target ≥ 0.7: met" in text and "target ≤ 1.5× the echo's: MISSED" in text  # 20 µs vs 10 µs
    assert "15.9×" in text  # naive 2005 / reactor 126
    assert "Write → verified" in text and "320.0" in text
    assert "storm requests 126 ≤ writes + initial lists 222: met" in text
    assert "≥ 20× fewer requests than the naive script: 15.9× (MISSED: one patch and one Event" in text
    assert "Besides those: list pods 5" in text
    assert "growth ≤ 50 MB: met" in text


def test_the_targets_section_judges_each_figure_of_the_run() -> None:
    from bench.report import targets_lines

    webhook = {size: {"echo": _load(rps=1000, cpu=300 + 10 * int(size)),
                      "reactor": _load(rps=750, cpu=500 + 14 * int(size))} for size in ("1", "1000")}
    run = {"webhook": webhook,
           "memory": {"idle_pod_pss_mb": 98.0, "after_storm_pod_pss_mb": 150.0},
           "cache_scale": {"100k": {"cached": {"ready_s": 31.5}}},
           "slow_clients": {"clients": 64, "ms_p50": 4.0, "ms_max": 12.0, "codes": ["200"]}}
    text = "\n".join(targets_lines(run))
    assert "14.0 / 10.0 µs = 1.40×" in text and "≤ 1.5×" in text
    assert "98.0 MB" in text and "150.0 MB" in text and "reported" in text
    assert "31.5 s" in text and "≤ 30 s" in text
    assert "a notification's answer while 64 clients trickle" in text
    lines = {line.split("  ")[0]: line for line in text.splitlines()}
    assert "0.75" in lines["1-alert req/s, reactor / echo (same server)"]
    assert lines["1-alert req/s, reactor / echo (same server)"].endswith("met")
    assert lines["marginal CPU per alert, reactor / echo"].endswith("met")
    assert lines["/readyz at 100,000 cached objects"].endswith("MISSED")
    assert lines["whole pod idle (PSS, every process)"].endswith("met")
    assert lines["a notification's answer while 64 clients trickle"].endswith("met")
    run["slow_clients"]["codes"] = ["200", "503"]  # a 503 in the answers is not a quick answer
    assert "\n".join(targets_lines(run)).splitlines()[-2].endswith("MISSED")
