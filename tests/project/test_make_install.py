"""`make demo` / `make test` install quietly (issue 28's first-hour walk: a current pip shows setuptools' boxed
"Editable installation" BuildBackendWarning even with -q, ten lines of noise in a first run's output)."""

from __future__ import annotations

import re
from pathlib import Path

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def test_every_editable_install_filters_the_editable_warning() -> None:
    text = MAKEFILE.read_text(encoding="utf-8")
    assert re.search(r'^QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"$', text, re.M)
    installs = [line.strip() for line in text.splitlines() if re.search(r"pip install .*-e ", line)]
    assert len(installs) == 2, installs  # the runtime (make demo) and the test extras (make test)
    assert all(line.startswith("$(QUIET_EDITABLE) $(PY) -m pip install -q -e ") for line in installs), installs


def test_the_filter_is_a_message_prefix_python_accepts() -> None:
    """PYTHONWARNINGS `action:message`: the message is a regex matched at the start of the warning's text, and
    the category (default Warning) needs no import of setuptools at interpreter start."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message="Editable installation")
        warnings.warn("Editable installation.\n!!\n...", UserWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["something else"]
