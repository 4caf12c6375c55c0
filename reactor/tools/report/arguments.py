"""The flags of `reactor report`, declared without importing the report (the CLI declares every command's flags)."""

from __future__ import annotations

import argparse
from pathlib import Path

OUTPUTS = ("text", "json", "html")
POINTS = 2016  # the automatic step keeps about this many evaluations per series: 5 minutes over 7 days
DEFAULT_VALUES = Path("rules/thresholds.yaml")  # reactor.tools.rules.DEFAULT_VALUES, unimported


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prometheus-url", metavar="URL", help="the Prometheus holding the DCGM history "
                                                           "(default: confirm.prometheusUrl of --config)")
    p.add_argument("--token-file", metavar="FILE", help="bearer token file (default: confirm.tokenFile)")
    p.add_argument("--ca-file", metavar="FILE", help="CA bundle for an https URL (default: confirm.caFile)")
    p.add_argument("--timeout", metavar="DURATION", help="per query (default: confirm.timeout, else 60s)")
    p.add_argument("--kubeconfig", metavar="FILE",
                   help="read the pods' ownerReferences through this kubeconfig (read only) to group the pods "
                        "Prometheus has no kube-state-metrics owner series for (default: their names, a guess)")
    p.add_argument("--config", metavar="FILE", help="the policy file whose policy is replayed (default: defaults)")
    p.add_argument("--values", metavar="FILE", type=Path,
                   help=f"the rules' values file (default: {DEFAULT_VALUES} if present, else the rules' defaults)")
    p.add_argument("--since", default="7d", metavar="DURATION", help="how far back the window starts (default 7d)")
    p.add_argument("--until", metavar="TIME", help="RFC 3339 end of the window (default: now)")
    p.add_argument("--step", metavar="DURATION", help="evaluation step (default: the rules' evaluation interval, "
                                                      f"or coarser to keep ~{POINTS} points per series)")
    p.add_argument("--namespace", action="append", metavar="NS", help="only this namespace; may repeat "
                                                                      "(default: every namespace with GPU series)")
    p.add_argument("--output", choices=OUTPUTS, default="text", help="text (default), json (schema.json) or html")
    p.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--plots", type=int, default=100, metavar="N",
                   help="--output html: plot the first N workloads of the table (default 100)")
    p.add_argument("--concurrency", type=int, default=4, metavar="N", help="queries at once (default 4)")
    p.add_argument("--repeat-interval", default="4h", metavar="DURATION",
                   help="Alertmanager's repeat_interval: a firing alert is notified again this often (default 4h)")
