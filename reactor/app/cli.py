"""`reactor` command line: serve, check-config, demo, sim, plan, rules, doctor."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import ConfigError, ReactorError
from ..settings import load_settings
from . import logs

log = logging.getLogger("reactor")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reactor", description="GPU Reactor: act on GPU utilization alerts.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="serve the webhook against a real cluster (in-cluster config or kubeconfig)")
    p.add_argument("--config", help="the policy file (YAML); REACTOR_* variables override it")

    p = sub.add_parser("check-config", help="validate a policy file; exit 1 and name the key when it is wrong")
    p.add_argument("file")

    p = sub.add_parser("demo", help="run the reactor on the embedded cluster and show it acting")
    p.add_argument("--once", action="store_true", help="exit when the demo notifications are handled")
    p.add_argument("--port", type=int, default=0, help="reactor port (0 = any free port)")

    p = sub.add_parser("sim", help="run the embedded Kubernetes API server standalone")
    p.add_argument("--seed", action="append", default=[], help="manifests: a YAML file, a folder or a kustomize entry point; may repeat")
    p.add_argument("--port", type=int, default=6443)
    p.add_argument("--rbac", action="store_true", help="enforce Roles and bindings from the seeds (serves https)")
    p.add_argument("--kubeconfig", default="sim.kubeconfig", help="where to write the kubeconfig")

    p = sub.add_parser("plan", help="print what the reactor would do for a notification, writing nothing")
    p.add_argument("--alerts", required=True, help="an Alertmanager webhook body (JSON)")
    p.add_argument("--config", help="the policy file")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--kubeconfig", help="read the cluster through this kubeconfig")
    src.add_argument("--seed", action="append", help="manifests for an embedded cluster to plan against")

    p = sub.add_parser("rules", help="render the Prometheus rules from rules/thresholds.yaml")
    p.add_argument("rules_args", nargs=argparse.REMAINDER)

    from ..tools import doctor
    doctor.add_arguments(sub.add_parser("doctor", help="preflight: why would nothing happen? one line per check"))

    args = parser.parse_args(argv)
    try:
        return _dispatch(args)
    except ConfigError as e:
        print(f"reactor: invalid configuration: {e}", file=sys.stderr)
        return 2
    except ReactorError as e:
        print(f"reactor: {e}", file=sys.stderr)
        return 1


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "check-config":
        settings = load_settings(args.file)
        p = settings.policy
        print(f"{args.file}: ok (allow={list(p.allow)}, dryRun={p.dry_run}, mode={p.default_mode}, "
              f"gpuResource={p.gpu_resource})")
        return 0
    if args.command == "serve":
        return _serve(args.config)
    if args.command == "demo":
        from ..tools.demo import run_demo
        return run_demo(once=args.once, port=args.port)
    if args.command == "sim":
        from ..tools.sim_command import run_sim
        return run_sim(seeds=args.seed, port=args.port, kubeconfig=args.kubeconfig, rbac=args.rbac)
    if args.command == "plan":
        from ..tools.plan import run_plan
        return run_plan(alerts=args.alerts, config=args.config, kubeconfig=args.kubeconfig, seeds=args.seed)
    if args.command == "doctor":
        from ..tools.doctor import run_command
        return run_command(args)
    if args.command == "rules":
        from ..tools.rules import render_command
        return render_command(list(args.rules_args))
    raise AssertionError(args.command)


def _serve(config: str | None) -> int:
    from .assembly import assemble, check_ladder
    from .runner import run

    settings = load_settings(config)
    logs.configure(settings.log_format, settings.log_level)
    service = assemble(settings)
    missing = check_ladder(service)
    if missing:
        log.warning("priority ladder names classes that do not exist", extra={"missing": missing})
    log.info("serving", extra={"listen": settings.server.listen, "probeListen": settings.server.probe_listen,
                               "dryRun": settings.policy.dry_run})
    run(service.app, settings, service.probes, service.informers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
