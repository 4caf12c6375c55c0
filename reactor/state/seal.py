"""The reactor's own state annotations, authenticated: an HMAC-SHA256 the tenant cannot compute.

`last-action`, `cooldown-until` and `original` decide what the reactor does next (a revert writes
`original` back), and tenants can edit their workloads' annotations. So the reactor writes, in the
same patch, `gpu-reactor.io/state-mac`: an HMAC over the workload's metadata.uid and those three
values, keyed by a secret only the reactor holds (a file, mounted from a Secret). State whose MAC
does not verify under the current or the previous key (rotation) is never acted on. The
people-facing annotations (`mode`, bounds) stay plain: they can only narrow what the policy allows.

This module must never log, print or put key material in an exception or a repr.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from reactor.core.errors import ConfigError
from reactor.core.model import EMPTY, Workload
from reactor.state.annotations import COOLDOWN_UNTIL, LAST_ACTION, ORIGINAL, PREFIX, VERIFICATION

log = logging.getLogger(__name__)

STATE_MAC = PREFIX + "state-mac"
SIGNED = (LAST_ACTION, COOLDOWN_UNTIL, ORIGINAL, VERIFICATION)
_VERSION = "v1"
MIN_KEY_BYTES = 32


@dataclass(frozen=True, slots=True)
class StateKeys:
    """The current key (signs and verifies) and, during a rotation, the previous one (verifies only)."""

    current: bytes = field(repr=False)
    previous: bytes | None = field(default=None, repr=False)

    def mac(self, uid: str, annotations: Mapping[str, str | None], key: bytes | None = None) -> str:
        """`v1:<hex>` over the uid and the signed annotations' values (None: absent)."""
        values = [annotations.get(k) for k in SIGNED]
        if values[-1] is None:
            values.pop()  # state written before `verification` existed keeps its MAC
        message = json.dumps([_VERSION, uid, values], separators=(",", ":"))
        digest = hmac.new(key or self.current, message.encode(), hashlib.sha256).hexdigest()
        return f"{_VERSION}:{digest}"

    def sealed(self, uid: str, annotations: Mapping[str, str | None]) -> dict[str, str | None]:
        """`annotations` (the values a patch will leave) plus their MAC, always under the current key."""
        return {**annotations, STATE_MAC: self.mac(uid, annotations)}

    def authentic(self, uid: str, annotations: Mapping[str, str]) -> bool:
        given = annotations.get(STATE_MAC)
        if not uid or not isinstance(given, str):
            return False
        keys = (self.current,) if self.previous is None else (self.current, self.previous)
        return any(hmac.compare_digest(given, self.mac(uid, annotations, key)) for key in keys)


def authenticate(workload: Workload, keys: StateKeys | None) -> Workload:
    """The workload with its reactor state kept only if it verifies; otherwise the state is dropped
    and the annotations found are listed in `state.unauthenticated` (the policy refuses to act).

    No state at all (a workload the reactor never touched) is authentic by definition. Without keys
    (`reactor plan` with no key file), any state is unauthenticated.
    """
    found = tuple(k for k in (*SIGNED, STATE_MAC) if k in workload.annotations)
    if not found or (keys is not None and keys.authentic(workload.uid, workload.annotations)):
        return workload
    state = workload.state
    state = replace(state, last_action=None, cooldown_until=None, original=EMPTY, verification=None,
                    unauthenticated=found,
                    invalid=tuple(k for k in state.invalid if k not in SIGNED))
    return replace(workload, state=state)


def load_state_keys(key_file: str | None, previous_file: str | None, *, required: bool = False) -> StateKeys | None:
    """The keys named by `state.keyFile` / `state.previousKeyFile`; None when no key file is set.

    `required` (a reactor that may write, i.e. not dryRun): no key file is a ConfigError. There is no
    ephemeral key: after a restart, or on the other replica, it could not verify what it signed.

    A previous key file that does not exist means no rotation is in progress (the Secret's optional
    `previous` entry is absent). A key shorter than MIN_KEY_BYTES is refused.
    """
    if key_file is None:
        if required:
            raise ConfigError("state.keyFile", "required unless dryRun: the reactor signs the state annotations it "
                                               "writes, and acts on none it cannot verify (see the README)")
        return None
    current = _read_key("state.keyFile", key_file)
    previous = None
    if previous_file is not None and Path(previous_file).exists():
        previous = _read_key("state.previousKeyFile", previous_file)
    log.info("state keys loaded", extra={"key_file": key_file, "previous": previous is not None})
    return StateKeys(current, previous)


def _read_key(setting: str, path: str) -> bytes:
    try:
        key = Path(path).read_bytes().strip()
    except OSError as e:
        raise ConfigError(setting, f"cannot read {path}: {e.strerror}") from e
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(setting, f"{path} holds {len(key)} bytes; at least {MIN_KEY_BYTES} are needed "
                                   "(e.g. `openssl rand -hex 32`)")
    return key
