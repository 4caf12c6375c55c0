"""The rules' own expressions, made to run on a Prometheus that has no GPU Reactor rules installed.

Pure string building. The alerting rules read recorded series (`gpu_reactor:*`), which exist only where the
rules run. Here each recorded name is replaced by the expression that records it, rendered by reactor/tools/rules
from the same values file: a bare name becomes `(expr)`, a range `name[w]` becomes the subquery `(expr)[w:i]` at the
rules' evaluation interval `i` (what the rule group would have recorded every `i`), and the namespace matchers the
rules put on recorded names (`{namespace="x"}`, `{namespace!~"a|b"}`) become a join on a constant namespace label.
Every raw dcgm-exporter selector is narrowed to one namespace, so a query costs what that namespace holds.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from reactor.config.fields import parse_duration
from reactor.tools.rules import cpu, promql
from reactor.tools.rules.groups import alerting_rules, recording_rules
from reactor.tools.rules.values import Values

# The per-container series the report reads besides the alerts (see collect.py).
UTILIZATION = promql.UTILIZATION
FB_USED = promql.FB_USED
GPUS = promql.GPUS
IDLE_GPUS = promql.IDLE_GPUS
THROTTLING = cpu.THROTTLING
_RECORDED = re.compile(r"(gpu_reactor:[a-zA-Z0-9_:]+)(\{[^}]*\})?(\[[0-9a-z]+\])?")
VARIANT = "thresholds"  # the label of a namespace override's rule: `namespaces.<ns>` (groups.py `Variant`)
_MATCHER = re.compile(r'\s*namespace\s*(=|!~|=~|!=)\s*"([^"]*)"\s*')
_SUBQUERY = re.compile(r"\[([0-9a-z]+)\]")
# Sharing (reactor/tools/rules/promql.py `unshared`, `container_shared`): the recorded GPUs held by more than one pod,
# and what reads it. Where no GPU was held by more than one pod, `SHARED_GPUS` answers nothing at every evaluation,
# so `X unless on (UUID, GPU_I_ID) SHARED_GPUS` is X and the containers on shared GPUs are none.
SHARED_GPUS = f"({promql.GPU_PODS} > 1)"
_UNLESS_SHARED = f"\nunless on (UUID, GPU_I_ID)\n{SHARED_GPUS}"
NOTHING = "(vector(1) < 0)"  # an empty instant vector, cheap at every step


@dataclass(frozen=True, slots=True)
class AlertRule:
    """One alerting rule, its expression self-contained, with the `for` and `keep_firing_for` it fires under."""

    name: str
    expr: str
    for_: timedelta
    keep_firing_for: timedelta
    labels: Mapping[str, str]
    cpu_annotated: bool = False  # its alerts carry `cpu_throttling` (the shrink alerts: a CPU-starved one keeps GPUs)
    rule_expr: str = ""  # the rule's own expression, reading the recorded series by name (evaluated in local.py)


class Expressions:
    """The rules of one values file, inlined; `alerts(ns)` and `series(name, ns)` narrow them to one namespace.

    `resolution` is the subqueries' step: the rules' evaluation interval (what the rule group records), or the
    report's coarser step, a multiple of it — a week at 5 minutes then costs Prometheus a fifth of the inner
    evaluations, and the windows are sampled at the step the report already reads them at.
    """

    def __init__(self, values: Values, resolution: timedelta | None = None, *, shared: bool = True) -> None:
        self.values = values
        self.resolution = resolution
        self.shared = shared
        self.interval = max(values.evaluation_interval, resolution or values.evaluation_interval)
        self._recorded: dict[str, str] = {}
        self._rules: dict[str, list[str]] = {}
        self._unshared: Expressions | None = None
        ranges: list[timedelta] = []
        for rule in recording_rules(values):
            # Several rules recording one name (per-namespace variants) record the union of their results.
            name, expr = rule["record"], rule["expr"]
            ranges += _ranges(expr)
            if not shared:
                expr = NOTHING if name == promql.SHARED else _without_sharing(expr)
            self._rules.setdefault(name, []).append(expr)
            mine = self._inline(expr)
            self._recorded[name] = f"({self._recorded[name]})\nor\n({mine})" if name in self._recorded else mine
        self._alerts = [self._alert(rule) for rule in alerting_rules(values)]
        ranges += [r for rule in alerting_rules(values) for r in _ranges(rule["expr"])]
        # How far before an evaluation a query may read a recorded series: subqueries nest at most as deep as the
        # rules read recorded series from recorded series, so the sum of every range bounds it.
        self.reach = sum(set(ranges), timedelta(0))

    def without_sharing(self) -> Expressions:
        """The same rules where no GPU is held by more than one pod (`sharing_probe` answered nothing): the
        sharing clauses, a third of a rule's evaluation and more, are left out, which changes no answer."""
        if not self.shared:
            return self
        if self._unshared is None:
            self._unshared = Expressions(self.values, self.resolution, shared=False)
        return self._unshared

    def sharing_probe(self, namespace: str) -> str:
        """The GPUs of `namespace` held by more than one pod, as every rule reads them: where a range query of this
        answers nothing over the window widened by `reach`, `without_sharing()` answers what these rules do."""
        return self.narrow(f"({self._recorded[promql.GPU_PODS]}) > 1", namespace)

    def alerts(self, namespace: str) -> list[AlertRule]:
        """The rules that judge `namespace`: a namespace override's variant only there, the default one elsewhere
        (groups.py `variants`: every container is judged by exactly one threshold), so no query is spent on a
        variant whose namespace matcher leaves nothing."""
        overridden = {(a.name, a.labels[VARIANT].removeprefix("namespaces.")) for a in self._alerts
                      if VARIANT in a.labels}
        return [dataclasses.replace(a, expr=self.narrow(a.expr, namespace)) for a in self._alerts
                if (a.labels.get(VARIANT) == f"namespaces.{namespace}")
                or (VARIANT not in a.labels and (a.name, namespace) not in overridden)]

    @property
    def longest_for(self) -> timedelta:
        """The longest `for` of any rule: how far before a window the rules need to have run to be in step."""
        return max((a.for_ for a in self._alerts), default=timedelta(0))

    @property
    def recorded(self) -> frozenset[str]:
        """The names the recording rules record."""
        return frozenset(self._recorded)

    def recording(self, name: str) -> list[str]:
        """The expressions recording `name`, as the rules write them (reading other recorded series by name)."""
        return list(self._rules[name])

    def series(self, name: str, namespace: str) -> str:
        """A recorded series (`UTILIZATION`, `FB_USED`, `GPUS`, `IDLE_GPUS`, `THROTTLING`, or any an alert reads),
        self-contained."""
        return self.narrow(f"({self._recorded[name]})", namespace)

    def raw(self, build: str, namespace: str | None) -> str:
        """A raw dcgm-exporter selector `build` (with `{m}` for the matchers) per workload container, kept with
        its `modelName`: the MIG fit reads the framebuffer in MiB of each GPU model."""
        v = self.values
        scrape = promql.Scrape(v.scrape_labels, v.exporter_container, v.exporter_job, v.exporter_namespace)
        if scrape.labels == "exported":
            series = build.replace("{m}", "{" + scrape.matchers('exported_pod!=""') + "}")
            for label in promql.WORKLOAD:
                series = f'label_replace({series}, "{label}", "$1", "exported_{label}", "(.*)")'
        else:
            series = build.replace("{m}", "{" + scrape.matchers(
                f'pod!="", container!="", container!~"{scrape.exporter_container}"') + "}")
        expr = f"max by ({promql.BY_WORKLOAD}, modelName) ({series})"
        return expr if namespace is None else self.narrow(expr, namespace)

    def _alert(self, rule: Mapping[str, Any]) -> AlertRule:
        keep = rule.get("keep_firing_for")
        keep_for = parse_duration("keep_firing_for", keep) if keep else timedelta(0)
        return AlertRule(rule["alert"], self._inline(rule["expr"]), parse_duration("for", rule["for"]), keep_for,
                         dict(rule.get("labels", {})), cpu.ANNOTATION in rule.get("annotations", {}), rule["expr"])

    def _inline(self, expr: str) -> str:
        def replace(m: re.Match[str]) -> str:
            name, matchers, window = m.group(1), m.group(2), m.group(3)
            if name not in self._recorded:
                raise ValueError(f"{name} is read before it is recorded")
            inner = f"({self._recorded[name]})"
            if matchers:
                inner = f"({_filtered(inner, matchers)})"
            if window:
                return f"{inner}{window[:-1]}:{promql.duration(self.interval)}]"
            return inner

        return _RECORDED.sub(replace, expr)

    def narrow(self, expr: str, namespace: str) -> str:
        """Only `namespace`'s raw series: the exporter's and cAdvisor's matchers gain the workload's namespace. A
        GPU's freshness (`gpu_reported`) stays cluster-wide: a free GPU's series name no namespace."""
        ns_label = "exported_namespace" if self.values.cadvisor_labels == "exported" else "namespace"
        expr = expr.replace('container!="POD", pod!=""', f'container!="POD", pod!="", {ns_label}="{namespace}"')
        if self.values.scrape_labels == "exported":
            return expr.replace('exported_pod!=""', f'exported_pod!="", exported_namespace="{namespace}"')
        return expr.replace('pod!="", container!=""', f'pod!="", container!="", namespace="{namespace}"')


def _without_sharing(expr: str) -> str:
    return expr.replace(_UNLESS_SHARED, "").replace(SHARED_GPUS, NOTHING)


def _ranges(expr: str) -> list[timedelta]:
    return [parse_duration("range", r) for r in _SUBQUERY.findall(expr)]


def _constant(namespace: str) -> str:
    return f'label_replace(vector(1), "namespace", "{namespace}", "", "")'


def _filtered(inner: str, matchers: str) -> str:
    """`inner` restricted as `{namespace…}` would restrict a recorded series (the rules use no other matcher)."""
    m = _MATCHER.fullmatch(matchers.strip("{}"))
    if m is None:
        raise ValueError(f"unsupported matchers on a recorded series: {matchers}")
    op, value = m.groups()
    if op not in ("=", "!~"):
        raise ValueError(f"unsupported namespace matcher {op}")
    names = value.split("|") if op == "!~" else [value]
    constants = " or ".join(_constant(n) for n in names)
    return f"{inner} {'and' if op == '=' else 'unless'} on (namespace) ({constants})"
