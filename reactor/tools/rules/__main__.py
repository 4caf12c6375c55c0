"""`python -m reactor.rules render [--check]`."""

import sys

from reactor.tools.rules import render_command

raise SystemExit(render_command(sys.argv[1:]))
