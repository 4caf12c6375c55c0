"""The state MAC (reactor/state/seal.py): what it binds, what it accepts during a rotation, what it never shows."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from reactor.core.errors import ConfigError, TemporaryError
from reactor.core.model import Container, Workload, WorkloadRef
from reactor.state.annotations import COOLDOWN_UNTIL, LAST_ACTION, MODE, ORIGINAL, read_state
from reactor.state.seal import (
    CHECK_SECONDS,
    LEGACY,
    REREAD_SECONDS,
    STATE_MAC,
    KeyFiles,
    StateKeys,
    authenticate,
    load_state_keys,
    parse_mac,
)

pytestmark = pytest.mark.unit

KEY, OLD = b"k" * 32, b"o" * 32
STATE = {LAST_ACTION: '{"x": 1}', COOLDOWN_UNTIL: "2025-01-01T00:00:00Z", ORIGINAL: None}


def _workload(annotations: dict[str, str], uid: str = "uid-1") -> Workload:
    return Workload(ref=WorkloadRef("Deployment", "ml", "w"), resource_version="1", containers=(Container("c", 1),),
                    state=read_state(annotations), annotations=annotations, uid=uid)


def _written(keys: StateKeys, uid: str = "uid-1") -> dict[str, str]:
    return {k: v for k, v in keys.sealed(uid, STATE).items() if v is not None}


def test_the_mac_binds_uid_and_every_value() -> None:
    keys = StateKeys(KEY)
    written = _written(keys)
    assert keys.authentic("uid-1", written)
    assert not keys.authentic("uid-2", written), "copied to another workload"
    for key in (LAST_ACTION, COOLDOWN_UNTIL):
        assert not keys.authentic("uid-1", {**written, key: written[key] + " "}), f"{key} edited"
    assert not keys.authentic("uid-1", {**written, ORIGINAL: "{}"}), "a value added"
    assert not keys.authentic("uid-1", {k: v for k, v in written.items() if k != STATE_MAC}), "no MAC"
    assert not StateKeys(OLD).authentic("uid-1", written), "another key"


def test_rotation_verifies_with_the_previous_key_and_signs_with_the_current() -> None:
    written = _written(StateKeys(OLD))
    rotating = StateKeys(KEY, previous=OLD)
    assert rotating.authentic("uid-1", written)
    write = "0123456789abcdef"
    assert rotating.sealed("uid-1", STATE, write)[STATE_MAC] == StateKeys(KEY).sealed("uid-1", STATE, write)[STATE_MAC]


def test_unauthenticated_state_is_dropped_and_named_people_annotations_kept() -> None:
    forged = {MODE: "recommend", LAST_ACTION: '{"x": 1}', ORIGINAL: '{"replicas": 40}'}
    w = authenticate(_workload(forged), StateKeys(KEY))
    assert w.state.unauthenticated == (LAST_ACTION, ORIGINAL)
    assert (w.state.last_action, dict(w.state.original), w.state.mode) == (None, {}, "recommend")
    plain = authenticate(_workload({MODE: "off"}), StateKeys(KEY))
    assert plain.state.unauthenticated == (), "no state: nothing to verify"
    keyless = authenticate(_workload(forged), None)
    assert keyless.state.unauthenticated == (LAST_ACTION, ORIGINAL), "no key: nothing verifies"


def test_keys_never_show(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    secret = "s3cr3t-" * 8
    (tmp_path / "key").write_text(secret + "\n")
    with caplog.at_level(logging.DEBUG):
        keys = load_state_keys(str(tmp_path / "key"), str(tmp_path / "absent"))
    assert keys is not None and keys.current == secret.encode() and keys.previous is None
    assert secret not in repr(keys) and "s3cr3t" not in caplog.text


def test_a_short_or_missing_key_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "short").write_text("abc\n")
    with pytest.raises(ConfigError, match=r"^state.keyFile: .* holds 3 bytes; at least 32"):
        load_state_keys(str(tmp_path / "short"), None)
    with pytest.raises(ConfigError, match=r"^state.keyFile: cannot read"):
        load_state_keys(str(tmp_path / "missing"), None)
    assert load_state_keys(None, None) is None
    with pytest.raises(ConfigError, match=r"^state.keyFile: required unless dryRun"):
        load_state_keys(None, None, required=True)


@pytest.mark.parametrize("given", ["v1:é", "v1:" + "é" * 64, "V1:" + "0" * 64, "v1:" + "0" * 63, "v1:" + "0" * 65,
                                   "v1:" + "0" * 64 + "\n", "v2:" + "0" * 64, "v2:0123456789ABCDEF:" + "0" * 64,
                                   "v2:0123456789abcdef:" + "g" * 64, "v3:x", "", "x" * 100_000, 7, None,
                                   "v1:" + "٠" * 64])
def test_anything_but_the_documented_format_is_not_a_mac(given: object) -> None:
    """`v1:é` used to reach hmac.compare_digest, which raises TypeError on non-ASCII text; now nothing but
    `v1:<64 hex>` or `v2:<16 hex>:<64 hex>` is even compared (Arabic-Indic digits are not hex either)."""
    assert parse_mac(given) is None
    assert not StateKeys(KEY).authentic("uid-1", {LAST_ACTION: '{"x": 1}', STATE_MAC: given})  # type: ignore[dict-item]


def test_the_write_is_bound_and_named() -> None:
    keys = StateKeys(KEY)
    sealed = keys.sealed("uid-1", STATE, "0123456789abcdef")
    written = {k: v for k, v in sealed.items() if v is not None}
    assert parse_mac(written[STATE_MAC]) == ("v2", "0123456789abcdef")
    assert keys.written("uid-1", written) == "0123456789abcdef"
    other = written[STATE_MAC].replace("v2:0123456789abcdef", "v2:fedcba9876543210")
    assert keys.written("uid-1", {**written, STATE_MAC: other}) is None, "another write's name on this MAC"
    legacy = {**written, STATE_MAC: keys.mac("uid-1", STATE)}
    assert keys.written("uid-1", legacy) == LEGACY, "a v1 record verifies and names no write"


def test_key_files_are_re_read_by_content(tmp_path: Path) -> None:
    """Removed: the previous key stops verifying at the next check (the stamp changed). Rewritten with the same size
    and the old mtime: re-read within REREAD_SECONDS all the same. The generation moves with each change."""
    current, previous = tmp_path / "key", tmp_path / "previous"
    current.write_bytes(KEY)
    previous.write_bytes(OLD)
    now = [0.0]
    keys = KeyFiles(str(current), str(previous), clock=lambda: now[0])
    old_record = _written(StateKeys(OLD))
    assert keys.authentic("uid-1", old_record) and keys.generation == 0
    previous.unlink()
    now[0] += CHECK_SECONDS / 2
    assert keys.authentic("uid-1", old_record) and keys.generation == 0  # checked half a check ago
    now[0] += CHECK_SECONDS / 2
    assert not keys.authentic("uid-1", old_record) and keys.generation == 1
    stat = current.stat()
    current.write_bytes(b"n" * 32)
    os.utime(current, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    new_record = _written(StateKeys(b"n" * 32))
    now[0] += REREAD_SECONDS
    assert keys.authentic("uid-1", new_record) and keys.generation == 2


def test_an_unreadable_current_key_fails_closed(tmp_path: Path) -> None:
    current = tmp_path / "key"
    current.write_bytes(KEY)
    now = [0.0]
    keys = KeyFiles(str(current), None, clock=lambda: now[0])
    record = _written(keys)
    current.unlink()
    now[0] += CHECK_SECONDS
    assert not keys.authentic("uid-1", record)
    with pytest.raises(TemporaryError):
        keys.sealed("uid-1", STATE)
    current.write_bytes(KEY)
    assert keys.authentic("uid-1", record)
