"""The state MAC (reactor/state/seal.py): what it binds, what it accepts during a rotation, what it never shows."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from reactor.core.errors import ConfigError
from reactor.core.model import Container, Workload, WorkloadRef
from reactor.state.annotations import COOLDOWN_UNTIL, LAST_ACTION, MODE, ORIGINAL, read_state
from reactor.state.seal import STATE_MAC, StateKeys, authenticate, load_state_keys

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
