"""The policy layer stays pure: importing it pulls in no web, Kubernetes or metrics library."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ("flask", "kubernetes", "prometheus_client", "werkzeug")


def test_policy_imports_no_io_libraries():
    code = (
        "import json, sys; import reactor.policy, reactor.state.annotations, reactor.act.budget; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert "reactor" in loaded  # the probe did import the package
    assert loaded.isdisjoint(FORBIDDEN), sorted(loaded & set(FORBIDDEN))
