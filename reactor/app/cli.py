"""`reactor` command line: serve, check-config, demo, sim, plan, rules, doctor.

Each command is one `_add_*` function that declares its arguments (each with help) and the function that
runs it; `main` turns every error a person can cause into one line on stderr and an exit status, never a
traceback. It holds no logic of its own: the commands live in `reactor.app` and `reactor.tools`.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from reactor import __version__
from reactor.app import logs
from reactor.config.settings import Settings, load_settings
from reactor.config.settings import warnings as settings_warnings
from reactor.core.errors import ConfigError, ConfigErrors, ReactorError, UsageError

log = logging.getLogger("reactor")
SIM_KUBECONFIG = ".reactor-sim/sim.kubeconfig"  # reactor.tools.sim_command.DEFAULT_KUBECONFIG, unimported
# reactor.tools.plan.EXAMPLES, unimported
PLAN_EXAMPLES = ("underutilized", "idle", "saturated", "metrics-missing", "rebalance")

EXIT_CODES = """exit status:
  0    done (check-config: the file is valid; warnings go to stderr)
  1    the command failed: the cluster did not answer, rule files are stale, the server could not start
  2    a bad argument or an invalid configuration (the message names the flag, file or key)
  130  interrupted (Ctrl-C); 128+N for another signal N (SIGTERM: 143)"""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that says where to look, not the whole usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def port(text: str) -> int:
    """A TCP port, 0 for any free one."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535 (0: any free port), got {value}")
    return value


def build_parser(command: str | None = None) -> Parser:
    """Every subcommand; given the `command` to run, the others are declared by name and summary only, so that
    `reactor serve` — gunicorn's master — does not import the doctor's modules (and through them the Kubernetes
    client) just to declare their flags."""
    parser = Parser(prog="reactor", description="GPU Reactor: act on GPU utilization alerts.", epilog=EXIT_CODES,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # Not `required`: argparse would check that before it names an unknown flag (`reactor --bogus` said "the
    # following arguments are required: COMMAND"); `parse` says which is wrong, in that order.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_add_serve, _add_check_config, _add_demo, _add_sim, _add_plan, _add_report, _add_rules):
        add(sub)
    if command in (None, "doctor"):
        _add_doctor(sub)
    else:
        _command(sub, "doctor", _missing_subcommand, DOCTOR)
    return parser


def _command(sub: Any, name: str, run: Callable[[argparse.Namespace], int], summary: str, **kw: Any) -> Parser:
    """A subcommand whose `run` main calls; `summary` is its line in the parent's help and, by default, its own."""
    p: Parser = sub.add_parser(name, help=summary, description=kw.pop("description", summary), **kw)
    p.set_defaults(run=run)
    return p


def _add_serve(sub: Any) -> None:
    p = _command(sub, "serve", _serve, "serve the webhook against a real cluster (in-cluster config or kubeconfig)",
                 description="Serve the Alertmanager webhook. Needs a bearer token file (server.tokenFile or "
                             "REACTOR_SERVER__TOKEN_FILE) and, unless dryRun, a state-signing key (state.keyFile); "
                             "outside a cluster also a kubeconfig (kube.kubeconfig). `reactor sim` prints a "
                             "complete command for its embedded cluster.")
    p.add_argument("--config", metavar="FILE", help="the policy file (YAML); REACTOR_* variables override its keys")


def _add_check_config(sub: Any) -> None:
    p = _command(sub, "check-config", _check_config, "validate a policy file: every problem at once, exit 2 if any",
                 description="Validate a policy file and the REACTOR_* variables; print every problem with the "
                             "file key or variable it comes from (exit 2), or ok plus warnings for a policy that "
                             "acts nowhere, or acts on alerts unconfirmed by Prometheus (exit 0).")
    p.add_argument("file", metavar="FILE", help="the policy file (YAML) to validate")


def _add_demo(sub: Any) -> None:
    p = _command(sub, "demo", _demo, "run the reactor on the embedded cluster and show it acting")
    p.add_argument("--once", action="store_true", help="exit when the demo notifications are handled")
    p.add_argument("--port", type=port, default=0, help="the reactor's port (default 0: any free port)")


def _add_sim(sub: Any) -> None:
    p = _command(sub, "sim", _sim, "run the embedded Kubernetes API server standalone",
                 description="Serve the embedded Kubernetes API server until Ctrl-C, and print the kubeconfig, "
                             "the token file and the `reactor serve` command to run against it.")
    p.add_argument("--seed", action="append", default=[], metavar="PATH",
                   help="manifests: a YAML file, a folder or a kustomize entry point; may repeat "
                        "(default: the demo cluster)")
    p.add_argument("--port", type=port, default=0, help="the API server's port (default 0: any free port, so "
                                                        "that it never collides with a local kube-apiserver on 6443)")
    p.add_argument("--rbac", action="store_true", help="enforce Roles and bindings from the seeds (serves https)")
    p.add_argument("--kubeconfig", default=SIM_KUBECONFIG, metavar="FILE",
                   help="where to write the kubeconfig (default: .reactor-sim/sim.kubeconfig, a folder git ignores; "
                        "the webhook token and the state key go next to it, in sim.token and sim.state-key)")
    p.add_argument("--kube-version", metavar="1.MINOR",
                   help="the Kubernetes release to play: 1.28, 1.32, 1.33 or 1.35 (default: the newest modelled); "
                        "/version, discovery (pods/resize from 1.33), sidecars (from 1.29) and resize status follow it")


def _add_plan(sub: Any) -> None:
    p = _command(sub, "plan", _plan, "print what the reactor would do for a notification, writing nothing",
                 description="Run the engine in dry run on one notification and explain each decision. Without "
                             "--kubeconfig or --seed it plans against the demo cluster with the demo's policy "
                             "(try --example underutilized).")
    notification = p.add_mutually_exclusive_group(required=True)
    notification.add_argument("--alerts", metavar="FILE", help="an Alertmanager webhook body (JSON)")
    notification.add_argument("--example", choices=PLAN_EXAMPLES,
                              help="one of the demo's example notifications, shipped with the reactor")
    p.add_argument("--config", metavar="FILE", help="the policy file (default: the demo's policy when planning "
                                                    "against the demo cluster, else the defaults)")
    p.add_argument("--output", choices=("text", "json"), default="text",
                   help="text for people (default), or json: {\"outcomes\": [...]} as the webhook answers")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--kubeconfig", metavar="FILE", help="read a real cluster through this kubeconfig (read only)")
    src.add_argument("--seed", action="append", metavar="PATH",
                     help="manifests for an embedded cluster to plan against; may repeat (default: the demo cluster)")


def _add_report(sub: Any) -> None:
    from reactor.tools.report.arguments import add_arguments

    p = _command(sub, "report", _report, "what the rules and policy would have done over Prometheus history",
                 description="Read only: evaluate the rules' expressions over a window of Prometheus history, "
                             "replay the policy on each would-be alert, and print per workload the GPU-hours held, "
                             "released and added, the hours idle or saturated, and a MIG slice that would fit.")
    add_arguments(p)


def _add_rules(sub: Any) -> None:
    from reactor.tools.rules import add_render_arguments, run_render

    p = _command(sub, "rules", _missing_subcommand, "render the Prometheus rules from rules/thresholds.yaml")
    rules = p.add_subparsers(dest="rules_command", required=True, metavar="COMMAND")
    render = _command(rules, "render", run_render, "write (or with --check compare) the generated rule files")
    add_render_arguments(render)


DOCTOR = "preflight: why would nothing happen? one line per check"


def _add_doctor(sub: Any) -> None:
    from reactor.tools import doctor

    p = _command(sub, "doctor", doctor.run_command, DOCTOR)
    doctor.add_arguments(p)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; an unknown flag is named before a missing command."""
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(next((a for a in given if not a.startswith("-")), None))
    args, unknown = parser.parse_known_args(given)
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.error("a COMMAND is required (serve, check-config, demo, sim, plan, rules, doctor)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    prog = f"reactor {args.command}"
    try:
        status = int(args.run(args))
        sys.stdout.flush()  # inside the try: a closed pipe shows here, not in the interpreter's flush at exit
        return status
    except BrokenPipeError:
        # `reactor plan --output json | head -5`: the reader left; what was not read is not an error to report.
        # Point stdout at /dev/null so the interpreter's own flush at exit does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command its pipe ended
    except ConfigError as e:
        print(_invalid(prog, getattr(e, "problems", (e,))), file=sys.stderr)
        return 2
    except UsageError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    except ReactorError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _invalid(prog: str, problems: Sequence[ConfigError]) -> str:
    if len(problems) == 1:
        return f"{prog}: invalid configuration: {problems[0]}"
    return f"{prog}: invalid configuration, {len(problems)} problems:" + "".join(f"\n  {p}" for p in problems)


def _missing_subcommand(args: argparse.Namespace) -> int:
    raise AssertionError("argparse requires a subcommand")


def _check_config(args: argparse.Namespace) -> int:
    settings = load_settings(args.file)
    for warning in settings_warnings(settings):
        print(f"warning: {warning}", file=sys.stderr)
    p = settings.policy
    print(f"{args.file}: ok (allow={list(p.allow)}, dryRun={p.dry_run}, mode={p.default_mode}, "
          f"gpuResource={p.gpu_resource})")
    return 0


def _embedded_cluster(command: str) -> None:
    """The commands that run the embedded cluster need `reactor_sim`, a development tool the container image leaves
    out (the image is the service: no stand-in API server in a production pod). Said at once, with where to run
    them, rather than as an import error."""
    try:
        installed = importlib.util.find_spec("reactor_sim") is not None  # asked, never imported here
    except ValueError:  # a module set to None in sys.modules: not importable
        installed = False
    if not installed:
        raise ReactorError(f"needs the embedded cluster (the reactor_sim package), which this installation leaves "
                           f"out — the container image is the service alone; run `reactor {command}` from a checkout "
                           "(`make demo` sets it up), or point `reactor plan` at a cluster with --kubeconfig")


def _demo(args: argparse.Namespace) -> int:
    _embedded_cluster("demo")
    from reactor.tools.demo import run_demo

    return run_demo(once=args.once, port=args.port)


def _sim(args: argparse.Namespace) -> int:
    _embedded_cluster("sim")
    from reactor.tools.sim_command import run_sim

    return run_sim(seeds=args.seed, port=args.port, kubeconfig=args.kubeconfig, rbac=args.rbac,
                   kube_version=args.kube_version)


def _plan(args: argparse.Namespace) -> int:
    if args.kubeconfig is None:
        _embedded_cluster("plan")
    from reactor.app.assembly import plan_engine
    from reactor.tools.plan import example_path, run_plan

    alerts = args.alerts if args.example is None else example_path(args.example)
    return run_plan(alerts=alerts, config=args.config, kubeconfig=args.kubeconfig, seeds=args.seed,
                    build=plan_engine, output=args.output, example=args.example)


def _report(args: argparse.Namespace) -> int:
    from reactor.tools.report.command import run_command

    return run_command(args)


def _check_tls_files(settings: Settings) -> None:
    """Said here in one line each, not as the traceback gunicorn prints when it cannot load them."""
    missing = [ConfigError(key, f"no such file: {path}") for key, path in
               (("server.tlsCert", settings.server.tls_cert), ("server.tlsKey", settings.server.tls_key))
               if path is not None and not Path(path).is_file()]
    if missing:
        raise ConfigErrors(missing)


def _check_listen(settings: Settings) -> None:
    """A port already in use, said in one line per listener before the server starts (gunicorn would retry five
    times, printing each try, and then exit with its own message)."""
    problems = []
    listeners = (("server.listen", settings.server.listen), ("server.probeListen", settings.server.probe_listen))
    for key, address in listeners:
        host, _, port_text = address.rpartition(":")
        host = host.strip("[]") or "0.0.0.0"
        if int(port_text) == 0:
            continue
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, int(port_text)))
            except OSError as e:
                problems.append(ConfigError(key, f"cannot listen on {address}: {e.strerror}"))
    if problems:
        raise ConfigErrors(problems)


def _serve(args: argparse.Namespace) -> int:
    from reactor.app import preflight
    from reactor.app.runner import run

    settings = load_settings(args.config)
    _check_tls_files(settings)
    _check_listen(settings)
    logs.configure(settings.log_format, settings.log_level)
    preflight.check(settings)  # what the worker would refuse, said here; the worker assembles the service
    log.info("serving", extra={"listen": settings.server.listen, "probeListen": settings.server.probe_listen,
                               "dryRun": settings.policy.dry_run})
    run(settings, lambda probe_listener: _assemble(settings, probe_listener))
    return 0


def _assemble(settings: Settings, probe_listener: socket.socket) -> Any:
    """The service, built in gunicorn's worker (reactor/app/runner.py)."""
    from reactor.app.assembly import assemble, check_capabilities, check_ladder

    service = assemble(settings, probe_listener=probe_listener)
    check_capabilities(service)
    missing = check_ladder(service)
    if missing:
        log.warning("priority ladder names classes that do not exist", extra={"missing": missing})
    return service


if __name__ == "__main__":
    sys.exit(main())
