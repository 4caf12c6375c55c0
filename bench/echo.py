"""The ceiling for the webhook: a bare Flask JSON echo under the reactor's own gunicorn settings.

`POST /alerts` parses the JSON body and answers it back, nothing else: no token, no validation,
no cluster. It is served by `reactor.app.runner` with the options `gunicorn_options` derives from the
same settings file the reactor uses, so both run with the same worker class and threads.
Run as a child process: `python -m bench.echo --config POLICY.yaml` (REACTOR_* env applies).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from flask import Flask, Response, jsonify, request

from reactor.app.runner import serve_app
from reactor.config.settings import load_settings


def create_echo_app() -> Flask:
    app = Flask("echo")

    @app.post("/alerts")
    def echo() -> Response:
        return jsonify(json.loads(request.get_data(cache=False)))

    @app.get("/readyz")
    def readyz() -> Response:
        return jsonify({"status": "ready"})

    return app


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.echo")
    p.add_argument("--config", help="the policy file whose server.* settings to use")
    args = p.parse_args(argv)
    settings = load_settings(args.config)
    app = create_echo_app()
    app.config["MAX_CONTENT_LENGTH"] = settings.server.max_body_bytes
    serve_app(app, settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
