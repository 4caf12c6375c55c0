"""The figures of the reliability run: what was sent, what broke on purpose, what the cluster shows.

Scenarios add to one process-wide collector; the conftest prints the table at the end of the
session and writes it to `reliability/last-run.json`. Counts come from the answers and from the
cluster's own state (generations, annotations), never from the reactor's opinion of itself.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

# Columns of the table, in order: (field, header).
COLUMNS = (
    ("deliveries", "deliveries"),
    ("duplicates", "dupes"),
    ("faults", "faults"),
    ("applied", "applied"),
    ("expected", "expected"),
    ("double", "double"),
    ("lost", "lost"),
    ("fuzz_cases", "fuzz"),
    ("bad_input_5xx", "5xx-bad"),
    ("answers_503", "503s"),
    ("max_latency_s", "max s"),
    ("peak_rss_mib", "peak RSS MiB"),
)


# The trust boundary (issue 12), printed under the table: (key, label). The "acted" ones must be 0.
TRUST = (
    ("forgeries_tried", "tenant forgeries tried"),
    ("forgeries_acted", "tenant forgeries acted on (must be 0)"),
    ("forged_owners_tried", "forged owners tried"),
    ("forged_owners_acted", "forged owners acted on (must be 0)"),
    ("ghost_requests", "API requests for a 300-ghost notification"),
    ("replays_tried", "replays of the reactor's own older records tried (issue 23)"),
    ("replays_honoured", "replays honoured (must be 0)"),
    ("deletions_tried", "state deletions tried"),
    ("deletions_reset", "state deletions taken as a fresh start (must be 0)"),
    ("state_leases_tried", "state Leases another team pre-created or edited (issue 35)"),
    ("state_leases_blocking", "of those, ones that stopped the reactor (must be 0)"),
    ("owed_tried", "give-backs owed across a restart, with and without the watch cache"),
    ("owed_unpaid", "of those, not paid or paid twice (must be 0)"),
    ("refused_growth_tried", "growths a second full quota refuses"),
    ("refused_growth_gave", "of those, ones a donor gave for (must be 0)"),
)
_MUST_BE_ZERO = ("forgeries_acted", "forged_owners_acted", "replays_honoured", "deletions_reset",
                 "state_leases_blocking", "owed_unpaid", "refused_growth_gave")


@dataclass
class Row:
    deliveries: int = 0      # notifications POSTed (every try counts)
    duplicates: int = 0      # of those, repeats of a notification already delivered
    faults: int = 0          # faults injected (API errors, hangs, drops, lost answers, kills)
    applied: int = 0         # actions seen in the cluster (template generations bumped)
    expected: int = 0        # actions the scenario should cause
    double: int = 0          # workloads changed more often than expected (must be 0)
    lost: int = 0            # alerts without an outcome, or expected actions never applied (must be 0)
    fuzz_cases: int = 0      # hostile inputs tried
    bad_input_5xx: int = 0   # 5xx answers to hostile input (must be 0)
    answers_503: int = 0     # 503s (overload or API failure): Alertmanager retries them
    max_latency_s: float = 0.0  # slowest answer, from the moment it was due (storms)
    peak_rss_mib: float = 0.0   # resident memory of the reactor (arbiter + worker), sampled

    def merge(self, other: Row) -> None:
        for f in fields(self):
            if f.name in ("peak_rss_mib", "max_latency_s"):
                setattr(self, f.name, max(getattr(self, f.name), getattr(other, f.name)))
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class Figures:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.rows: dict[str, Row] = {}
        self.trust: dict[str, int] = {}
        self.notes: dict[str, float] = {}  # single measured figures beside the table, e.g. a p99

    def count_trust(self, **counts: int) -> None:
        """Add to the trust figures (keys from TRUST)."""
        with self._lock:
            for key, value in counts.items():
                self.trust[key] = self.trust.get(key, 0) + value

    def note(self, name: str, value: float) -> None:
        """A measured figure that is not a count per scenario; the worst of several runs is kept."""
        with self._lock:
            self.notes[name] = max(value, self.notes.get(name, value))

    def add(self, scenario: str, **counts: Any) -> None:
        row = Row(**counts)
        with self._lock:
            self.rows.setdefault(scenario, Row()).merge(row)

    def total(self) -> Row:
        total = Row()
        with self._lock:
            for row in self.rows.values():
                total.merge(row)
        return total

    def table(self) -> str:
        with self._lock:
            rows = [(name, row) for name, row in sorted(self.rows.items())]
        rows.append(("TOTAL", self.total()))
        header = ("scenario", *(h for _, h in COLUMNS))
        cells = [header] + [(name, *(_cell(getattr(r, f)) for f, _ in COLUMNS)) for name, r in rows]
        widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
        lines = []
        for n, c in enumerate(cells):
            lines.append("  ".join(v.ljust(widths[0]) if i == 0 else v.rjust(widths[i]) for i, v in enumerate(c)))
            if n == 0 or n == len(cells) - 2:
                lines.append("  ".join("-" * w for w in widths))
        with self._lock:
            trust = dict(self.trust)
        lines += [f"{label}: {trust[key]}" for key, label in TRUST if key in trust]
        return "\n".join(lines)

    def verdict(self) -> list[str]:
        """The promises the totals must keep; empty when they are kept."""
        t = self.total()
        broken = []
        if t.double:
            broken.append(f"{t.double} double action(s)")
        if t.lost:
            broken.append(f"{t.lost} alert(s) lost")
        if t.bad_input_5xx:
            broken.append(f"{t.bad_input_5xx} 5xx answer(s) to bad input")
        if t.applied != t.expected:
            broken.append(f"{t.applied} action(s) applied, {t.expected} expected")
        with self._lock:
            broken += [f"{self.trust[k]} {label.split(' (')[0]}" for k, label in TRUST
                       if k in _MUST_BE_ZERO and self.trust.get(k)]
        return broken

    def write(self, path: Path) -> None:
        with self._lock:
            doc = {"scenarios": {k: asdict(v) for k, v in sorted(self.rows.items())}}
        doc["total"] = asdict(self.total())
        with self._lock:
            doc["trust"] = dict(self.trust)
            doc["notes"] = dict(sorted(self.notes.items()))
        doc["broken"] = self.verdict()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2) + "\n")


def _cell(value: Any) -> str:
    if isinstance(value, float):  # measured only by some scenarios: "-" where not measured
        return "-" if value == 0 else f"{value:.1f}" if value < 100 else f"{value:.0f}"
    return str(value)


FIGURES = Figures()
