"""`make reliability`: run the reliability scenarios in their long form and print the figures.

The scenarios live in tests/reliability (pytest); with RELIABILITY_LONG=1 the storm runs a minute,
the fuzz tries ten times more cases and the chaos rounds are more and nastier. The table is printed
by the suite's conftest at the end of the run and kept in reliability/last-run.json; this script
prints it once more with the verdict, and exits non-zero when a test failed or a promise broke.

    python reliability/report.py            # long form
    python reliability/report.py --short    # the short form, as `make test` runs it
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAST_RUN = REPO / "reliability" / "last-run.json"
COLUMNS = ("deliveries", "duplicates", "faults", "applied", "expected", "double", "lost", "fuzz_cases",
           "bad_input_5xx", "answers_503", "max_latency_s", "peak_rss_mib")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="the short form (as in make test)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments, e.g. -k storm")
    args = parser.parse_args(argv)
    env = dict(os.environ, RELIABILITY_LONG="0" if args.short else "1")
    LAST_RUN.unlink(missing_ok=True)
    started = time.monotonic()
    rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "tests/reliability", *args.pytest_args], cwd=REPO, env=env)
    wall = time.monotonic() - started
    if not LAST_RUN.exists():
        print("reliability: no figures were written (did the suite run?)", file=sys.stderr)
        return rc or 1
    doc = json.loads(LAST_RUN.read_text())
    total = doc["total"]
    print("\nreliability figures (" + ("short" if args.short else "long") + f" form, {wall:.0f} s), totals:")
    width = max(len(c) for c in COLUMNS)
    for column in COLUMNS:
        value = total[column]
        print(f"  {column.ljust(width)}  {value:.1f}" if isinstance(value, float) else f"  {column.ljust(width)}  {value}")
    trust = doc.get("trust") or {}
    if trust:
        print("trust boundary (issues 12 and 23):")
        for key, value in trust.items():
            print(f"  {key.ljust(width)}  {value}")
    notes = doc.get("notes") or {}
    if notes:
        print("measured:")
        width = max(len(n) for n in notes)
        for name, value in notes.items():
            print(f"  {name.ljust(width)}  {value}")
    broken = list(doc["broken"]) + front_door(notes)
    if broken:
        print("PROMISES BROKEN: " + "; ".join(broken))
        return 1
    print("promises kept: no double action, no alert lost, no 5xx on bad input")
    return rc


# The front door (issue 23, tests/reliability/test_front_door.py): (note, label, the promise it must keep).
FRONT_DOOR = (
    ("notification_p99_s_64_slow_clients", "notification latency p99 with 64 slow clients connected (s)",
     lambda v: v < 10.0, "within Alertmanager's 10 s timeout"),
    ("healthz_success_pct_400_idle_probe_connections", "/healthz success under 400 idle probe connections (%)",
     lambda v: v >= 100.0, "every probe answered"),
)


def front_door(notes: dict[str, float]) -> list[str]:
    """Print the front door's figures; the promises they break (none when the tests did not run)."""
    found = [(key, label, kept, promise) for key, label, kept, promise in FRONT_DOOR if key in notes]
    if not found:
        return []
    print("front door (issue 23):")
    width = max(len(label) for _, label, _, _ in found)
    for key, label, _, _ in found:
        print(f"  {label.ljust(width)}  {notes[key]}")
    return [f"{label}: {notes[key]} ({promise})" for key, label, kept, promise in found if not kept(notes[key])]


if __name__ == "__main__":
    sys.exit(main())
