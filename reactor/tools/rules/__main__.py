"""`python -m reactor.rules render [--check]`."""

import sys

from . import render_command

raise SystemExit(render_command(sys.argv[1:]))
