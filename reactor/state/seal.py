"""The reactor's own state annotations, authenticated: an HMAC-SHA256 the tenant cannot compute.

`last-action`, `cooldown-until` and `original` decide what the reactor does next (a revert writes
the value from before the change back), and tenants can edit their workloads' annotations. So the reactor
writes, in the same patch, `gpu-reactor.io/state-mac`: an HMAC over the workload's metadata.uid, the write's
own identity and those values, keyed by a secret only the reactor holds (a file, mounted from a Secret).
State whose MAC does not verify under the current or the previous key (rotation) is never acted on. The
people-facing annotations (`mode`, bounds) stay plain: they can only narrow what the policy allows.

The format is `v2:<write>:<hmac>`: `write`, 16 lowercase hex digits drawn at random for each write, names
the record; the state ledger (reactor/state/ledger_codec.py) keeps the latest write of each uid where tenants cannot
edit it, so an older record the reactor signed itself (a replay) is told apart from the latest. Anything else
in the annotation (another version, upper case, a non-ASCII character) is simply not authentic: it is
matched against a fixed pattern before any comparison, never handed to `hmac.compare_digest` (which raises
TypeError on non-ASCII text). `v1:<hmac>` records (written before the write identity existed) still verify;
the ledger decides whether they may count.

The key files are re-read by content, as the webhook's token is (reactor/intake/bearer.py): whenever a
file's inode, size, mtime or ctime changes, and in any case every `REREAD_SECONDS`; their stats are taken at most
every `CHECK_SECONDS` (every workload a notification reads asks for the keys; why a system call per ask costs:
bearer.py). A previous key whose file is removed stops verifying within seconds; `generation` changes with the
keys, so verdicts cached under the old keys die with them.

This module must never log, print or put key material in an exception or a repr.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from reactor.core.errors import ConfigError, TemporaryError
from reactor.core.model import EMPTY, Workload
from reactor.state.annotations import (
    COOLDOWN_UNTIL,
    LAST_ACTION,
    ORIGINAL,
    PREFIX,
    REBALANCE,
    STATE_HOME,
    VERIFICATION,
)

log = logging.getLogger(__name__)

STATE_MAC = PREFIX + "state-mac"
SIGNED = (LAST_ACTION, COOLDOWN_UNTIL, ORIGINAL, VERIFICATION, REBALANCE)
_BEFORE_REBALANCE = len(SIGNED) - 1  # records sealed before `rebalance` existed keep their MAC
MIN_KEY_BYTES = 32
REREAD_SECONDS = 2.0
CHECK_SECONDS = 1.0
LEGACY = ""  # the write identity of a `v1:` record, which names none
_V1 = re.compile(r"v1:[0-9a-f]{64}")
_V2 = re.compile(r"v2:([0-9a-f]{16}):[0-9a-f]{64}")


def new_write() -> str:
    """A fresh write identity: 64 random bits, so two records of one uid never share one."""
    return secrets.token_hex(8)


def parse_mac(given: object) -> tuple[str, str] | None:
    """(version, write) of a well-formed `state-mac` value; None for anything else (never raises)."""
    if not isinstance(given, str) or len(given) > 90:
        return None
    if _V1.fullmatch(given):
        return "v1", LEGACY
    match = _V2.fullmatch(given)
    return ("v2", match.group(1)) if match else None


class StateKeys:
    """The current key (signs and verifies) and, during a rotation, the previous one (verifies only)."""

    __slots__ = ("_current", "_previous")

    def __init__(self, current: bytes, previous: bytes | None = None) -> None:
        self._current, self._previous = current, previous

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<keys hidden>)"

    def keys(self) -> tuple[bytes, bytes | None, int]:
        """(current, previous, generation): one consistent snapshot."""
        return self._current, self._previous, 0

    @property
    def current(self) -> bytes:
        return self.keys()[0]

    @property
    def previous(self) -> bytes | None:
        return self.keys()[1]

    @property
    def generation(self) -> int:
        """Changes whenever the keys do: part of the key of any cached verdict."""
        return self.keys()[2]

    def mac(self, uid: str, annotations: Mapping[str, str | None], key: bytes | None = None, *,
            write: str | None = None) -> str:
        """`v2:<write>:<hex>` over the uid, the write and the signed annotations' values (None: absent);
        `v1:<hex>` (no write) as records were sealed before the write identity existed."""
        values = [annotations.get(k) for k in SIGNED]
        if values[-1] is None:
            values.pop()  # no `rebalance`: the values as sealed before it existed, so those records keep their MAC
        key = key or self.current
        if write is None:
            if len(values) == _BEFORE_REBALANCE and values[-1] is None:
                values.pop()  # state written before `verification` existed keeps its MAC
            message = json.dumps(["v1", uid, values], separators=(",", ":"))
            return "v1:" + hmac.new(key, message.encode(), hashlib.sha256).hexdigest()
        message = json.dumps(["v2", uid, write, values], separators=(",", ":"))
        return f"v2:{write}:" + hmac.new(key, message.encode(), hashlib.sha256).hexdigest()

    def sealed(self, uid: str, annotations: Mapping[str, str | None],
               write: str | None = None) -> dict[str, str | None]:
        """`annotations` (the values a patch will leave) plus their MAC naming `write` (a fresh one if None), under
        the current key."""
        write = new_write() if write is None else write
        if not re.fullmatch(r"[0-9a-f]{16}", write):
            raise ValueError("a write identity is 16 lowercase hex digits (seal.new_write)")
        return {**annotations, STATE_MAC: self.mac(uid, annotations, write=write)}

    def written(self, uid: str, annotations: Mapping[str, str]) -> str | None:
        """The write identity of an authentic record (LEGACY for `v1:`), None when it does not verify."""
        parsed = parse_mac(annotations.get(STATE_MAC))
        if not uid or parsed is None:
            return None
        try:
            current, previous, _ = self.keys()
        except TemporaryError:
            return None  # no readable key: nothing verifies
        write = parsed[1] if parsed[0] == "v2" else None
        given = str(annotations[STATE_MAC]).encode()
        for key in (current,) if previous is None else (current, previous):
            if hmac.compare_digest(given, self.mac(uid, annotations, key, write=write).encode()):
                return parsed[1]
        return None

    def authentic(self, uid: str, annotations: Mapping[str, str]) -> bool:
        return self.written(uid, annotations) is not None


class KeyFiles(StateKeys):
    """The keys of `state.keyFile` and `state.previousKeyFile`, re-read by content.

    A current key file that becomes unreadable or too short fails closed: nothing verifies and nothing is
    sealed (TemporaryError: Alertmanager retries) until it is readable again. A previous key file that is
    removed ends the rotation: records signed by that key stop verifying at the next read.
    """

    __slots__ = ("_files", "_reread", "_check", "_clock", "_stamp", "_read_at", "_checked_at", "_snapshot", "_lock")

    def __init__(self, key_file: str, previous_file: str | None, *, reread_seconds: float = REREAD_SECONDS,
                 check_seconds: float = CHECK_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._files = (key_file, previous_file)
        self._reread, self._check, self._clock = reread_seconds, check_seconds, clock
        self._lock = threading.Lock()
        current, previous = _read_key("state.keyFile", key_file), _read_previous(previous_file)
        super().__init__(current, previous)
        # (current, previous, generation, error): replaced whole, so a reader without the lock never sees a key
        # from one read beside the generation of another.
        self._snapshot: tuple[bytes, bytes | None, int, str] = (current, previous, 0, "")
        self._stamp: tuple[object, ...] | None = self._stat()
        self._read_at = self._checked_at = clock()

    def keys(self) -> tuple[bytes, bytes | None, int]:
        """Within `CHECK_SECONDS` of the last check, the keys held, without a lock (every workload of every
        notification asks). Otherwise, under the lock, the files' stats, and a re-read when they changed or
        `REREAD_SECONDS` passed. While a key is unusable, every call checks again."""
        now = self._clock()
        current, previous, generation, error = self._snapshot
        if not error and now - self._checked_at < self._check:
            return current, previous, generation
        with self._lock:
            stamp = self._stat()
            if stamp != self._stamp or now - self._read_at >= self._reread:
                self._reload(stamp, now)
            self._checked_at = now
            current, previous, generation, error = self._snapshot
        if error:
            raise TemporaryError(f"state key unusable: {error}")
        return current, previous, generation

    def _reload(self, stamp: tuple[object, ...], now: float) -> None:
        current_key, previous_key, generation, error = self._snapshot
        try:
            current = _read_key("state.keyFile", self._files[0])
            previous = _read_previous(self._files[1])
        except ConfigError as e:
            if not error:
                log.error("state key unusable: nothing verifies or is sealed until it is readable",
                          extra={"error": str(e)})
            self._snapshot = (current_key, previous_key, generation + (not error), str(e))
            self._stamp, self._read_at = None, now  # read again at the next use
            return
        if (current, previous) != (current_key, previous_key) or error:
            generation += 1
            log.info("state keys reloaded", extra={"previous": previous is not None})
        self._current, self._previous = current, previous
        self._snapshot = (current, previous, generation, "")
        self._stamp, self._read_at = stamp, now

    def _stat(self) -> tuple[object, ...]:
        found: list[object] = []
        for path in self._files:
            try:
                st = os.stat(path) if path is not None else None
            except OSError:
                st = None
            found.append(None if st is None else (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        return tuple(found)


def authenticate(workload: Workload, keys: StateKeys | None) -> Workload:
    """The workload with its reactor state kept only if it verifies; otherwise the state is dropped
    and the annotations found are listed in `state.unauthenticated` (the policy refuses to act).

    No state at all (a workload the reactor never touched) is authentic here; whether the reactor's
    record should be there is the ledger's question. Without keys (`reactor plan` with no key file), any
    state is unauthenticated. A verified record's write identity lands in `state.write`.

    A record read from a Lease beside the resource (`STATE_HOME`, state/lease_home.py) that does not verify is no
    record at all, not a refusal: others may create or edit that Lease (another team, in a shared namespace), and a
    refusal would let them switch the reactor off for a resource that is not theirs. The ledger's copy, where it
    has one, stands in for it; the reactor's next write replaces it.
    """
    found = tuple(k for k in (*SIGNED, STATE_MAC) if k in workload.annotations)
    if not found:
        return workload
    write = keys.written(workload.uid, workload.annotations) if keys is not None else None
    if write is not None:
        return replace(workload, state=replace(workload.state, write=write))
    state = workload.state
    apart = STATE_HOME in workload.annotations
    state = replace(state, last_action=None, cooldown_until=None, original=EMPTY, verification=None, rebalance=None,
                    unauthenticated=() if apart else found,
                    invalid=tuple(k for k in state.invalid if k not in SIGNED))
    return replace(workload, state=state)


def load_state_keys(key_file: str | None, previous_file: str | None, *, required: bool = False,
                    announce: bool = True) -> StateKeys | None:
    """The keys named by `state.keyFile` / `state.previousKeyFile` (re-read by content); None when no key file
    is set. `announce`: log "state keys loaded" (the worker that uses them does; gunicorn's master, which only
    checks them first in reactor/app/preflight.py, does not, so `reactor serve` says it once).

    `required` (a reactor that may write, i.e. not dryRun): no key file is a ConfigError. There is no
    ephemeral key: after a restart, or on the other replica, it could not verify what it signed.

    A previous key file that does not exist means no rotation is in progress (the Secret's optional
    `previous` entry is absent). A key shorter than MIN_KEY_BYTES is refused.
    """
    if key_file is None:
        if required:
            raise ConfigError("state.keyFile", "required unless dryRun: the reactor signs the state annotations it "
                                               "writes, and acts on none it cannot verify (see docs/trust.md)")
        return None
    keys = KeyFiles(key_file, previous_file)
    if announce:
        log.info("state keys loaded", extra={"key_file": key_file, "previous": keys.previous is not None})
    return keys


def _read_previous(path: str | None) -> bytes | None:
    if path is None or not Path(path).exists():
        return None
    return _read_key("state.previousKeyFile", path)


def _read_key(setting: str, path: str) -> bytes:
    try:
        key = Path(path).read_bytes().strip()
    except OSError as e:
        raise ConfigError(setting, f"cannot read {path}: {e.strerror}") from e
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(setting, f"{path} holds {len(key)} bytes; at least {MIN_KEY_BYTES} are needed "
                                   "(e.g. `openssl rand -hex 32`)")
    return key
