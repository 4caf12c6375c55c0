"""Development tools around the reactor: the demo, `plan`, the `reactor sim` command, payload builders, the
rules renderer and the child-process launcher. The pipeline never imports these."""
