import sys

from reactor.app.cli import main

sys.exit(main())
