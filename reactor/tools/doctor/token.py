"""Doctor checks of the webhook's bearer token, without sending an alert anywhere.

Two ways, both read-only for the reactor's decisions:
- a signed probe (`--token-file`): POST `{}` to the webhook with the token. The reactor checks the token before
  the body (reactor/intake/web.py: token 401, size 413, type 415, payload 400), so a right token gets 400 (the
  empty body refused, nothing acted on) and a wrong one 401.
- the reactor's own counters through Prometheus: notifications accepted (200) and refused for the token (401) over
  the last hour. Alertmanager's copy of the token is what this one proves (its /api/v2/status hides secrets).
"""

from __future__ import annotations

from pathlib import Path

from reactor.intake.bearer import sendable
from reactor.tools.doctor.http import Unreachable, post_status, prometheus_query
from reactor.tools.doctor.report import Check, failing, ok, warning

NAME = "webhook-token"
WINDOW = "1h"
METRIC = "reactor_webhook_requests_total"
UNAUTHORIZED = "reactor_webhook_unauthorized_total"
TOKEN_FIX = ("make Alertmanager's bearer credentials the reactor's token Secret (chart: the Secret named by "
             "alertmanagerConfig.tokenSecret, in the AlertmanagerConfig's namespace)")


def signed_probe(alerts_url: str, token_file: Path) -> Check:
    try:
        raw = token_file.read_bytes().strip()
    except OSError as e:
        return failing(NAME, f"{token_file}: cannot read the token ({e})", "pass the token file the reactor mounts")
    if not sendable(raw):  # the HTTP client would refuse it with the whole token in its error
        return failing(NAME, f"{token_file}: not a token an HTTP header can carry (empty, or spaces or non-ASCII "
                             "inside)", "pass the token file the reactor mounts")
    try:
        status = post_status(alerts_url, token=raw.decode("ascii"))
    except Unreachable as e:
        return warning(NAME, f"not checked: {e}", "run the doctor where Alertmanager runs, or port-forward the Service")
    if status == 400:
        return ok(NAME, f"{alerts_url} accepts the token in {token_file} (an empty notification, refused 400 as "
                        "invalid; nothing acted on)")
    if status == 401:
        return failing(NAME, f"{alerts_url} refuses the token in {token_file} (401)", TOKEN_FIX)
    return warning(NAME, f"{alerts_url} answered {status} to a signed empty notification (expected 400)",
                   "is that the reactor's webhook (path /alerts)?")


def _increase(prometheus: str, code: str) -> float | None:
    series = prometheus_query(prometheus, f'sum(increase({METRIC}{{code="{code}"}}[{WINDOW}]))')
    return float(series[0]["value"][1]) if series else None


def _wrong(prometheus: str) -> float | None:
    """401s that carried a bearer token, the wrong one (None: a reactor without that counter)."""
    series = prometheus_query(prometheus, f'sum(increase({UNAUTHORIZED}{{credentials="wrong"}}[{WINDOW}]))')
    return float(series[0]["value"][1]) if series else None


def from_counters(prometheus: str, *, probing: bool = False) -> Check | None:
    """The reactor's own 200/401 counts over the last hour, as Prometheus scraped them.

    A 401 without any token (`credentials="missing"`) proves nothing about Alertmanager's copy of the token: this
    doctor's own reachability probe sends one, so a rerun within the hour would otherwise fail on its own probe.
    Only 401s with a wrong token fail the check; missing ones alone are a warning naming both causes.
    `probing`: the signed probe runs too (`--token-file` with `--reactor-url`), so counters that prove nothing
    give no line (None) rather than a second `webhook-token` warning asking for the --token-file just given."""
    if not prometheus_query(prometheus, f"count({METRIC})"):
        if probing:
            return None
        return warning(NAME, f"not checked through Prometheus: {METRIC} is not scraped",
                       "scrape the reactor's metrics port (chart: serviceMonitor.enabled), or pass --token-file")
    accepted = _increase(prometheus, "200") or 0.0
    refused = _increase(prometheus, "401") or 0.0
    wrong = _wrong(prometheus)
    if accepted > 0:
        return ok(NAME, f"the reactor accepted {accepted:.0f} notification(s) in the last {WINDOW}: "
                        f"Alertmanager's token is right ({refused:.0f} refused 401)")
    if refused > 0 and (wrong is None or wrong > 0):
        shown = refused if wrong is None else wrong
        return failing(NAME, f"the reactor accepted no notification in the last {WINDOW} and refused {shown:.0f} "
                             f"with 401 ({'wrong or missing' if wrong is None else 'a wrong'} token)", TOKEN_FIX)
    if refused > 0:
        if probing:
            return None
        return warning(NAME, f"the reactor accepted no notification in the last {WINDOW}; its {refused:.0f} 401(s) "
                             "came without any token (this doctor's own reachability probe sends one; or "
                             "Alertmanager's receiver has no credentials)",
                       "check the gpu-reactor receiver's http_config.authorization, or pass --token-file")
    if probing:
        return None
    return warning(NAME, f"no notification reached the reactor in the last {WINDOW}: the token is not proven",
                   "pass --token-file for a signed probe")
