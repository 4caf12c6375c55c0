"""The codec of the `gpu-reactor.io/*` annotations: the reactor's only memory, kept on the workload.

Pure: no I/O and no clock reads (the time is an argument). A value that cannot be parsed is
reported in `ReactorState.invalid` and never guessed at, so the policy can refuse to act on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from reactor.core.model import (
    Action,
    ComputeResources,
    LastAction,
    Mode,
    ReactorState,
    Rebalance,
    Signal,
    Verification,
    Workload,
)

PREFIX = "gpu-reactor.io/"
# Set by people.
MODE = PREFIX + "mode"
MIN_GPUS = PREFIX + "min-gpus"
MAX_GPUS = PREFIX + "max-gpus"
MIN_REPLICAS = PREFIX + "min-replicas"
MAX_REPLICAS = PREFIX + "max-replicas"
# Written by the reactor, in the same patch as the change they record.
LAST_ACTION = PREFIX + "last-action"
COOLDOWN_UNTIL = PREFIX + "cooldown-until"
ORIGINAL = PREFIX + "original"
REBALANCE = PREFIX + "rebalance"  # one side of a rebalance (policy/rebalance.py), sealed with the rest
DONOR = PREFIX + "donor"  # set by people: "true" opts the workload in as a rebalance donor (plain, a request only)
VERIFICATION = PREFIX + "verification"  # how the last action's rollout went (reactor/observe/verifier.py)
# Never written: set on a read by the Lease home only (lease_home.merged), so that seal.authenticate knows the record
# came from a Lease beside the resource, which others may create or edit: one that does not verify is no record.
STATE_HOME = PREFIX + "state-home"
PENDING, VERIFIED, REVERTED = "pending", "verified", "reverted"

# Keys of the `original` JSON: one per dimension the reactor changes.
GPUS = "gpus"
REPLICAS = "replicas"
PRIORITY_CLASS = "priorityClassName"
CPU = "cpu"  # {container: {"request": millicores | null, "limit": millicores}}
MEMORY = "memory"  # {container: {"request": bytes | null, "limit": bytes}}
_PER_CONTAINER = (GPUS, CPU, MEMORY)
MAX_BYTES = 1 << 50  # the largest memory size an annotation may hold (1 PiB)

_DIRECTIONS = frozenset({"up", "down", "revert"})
_COUNT = re.compile(r"^[0-9]{1,6}$")
MAX_COUNT = 999_999  # the largest count an annotation may hold (GPUs, replicas)
# Times outside these years are refused: adding a policy duration to year 9999 overflows, and no
# record the reactor wrote lies before its own existence or centuries ahead.
_YEARS = range(2000, 2200)
_PAIRS = ((MIN_GPUS, MAX_GPUS), (MIN_REPLICAS, MAX_REPLICAS))
_COUNTS = {MIN_GPUS: "min_gpus", MAX_GPUS: "max_gpus", MIN_REPLICAS: "min_replicas", MAX_REPLICAS: "max_replicas"}


class _Invalid(ValueError):
    """A value that does not parse; the key goes to `ReactorState.invalid`."""


def original_key(strategy: str) -> str:
    """The `original` key a strategy (e.g. "set-priority-up") changes: gpus, replicas or priorityClassName."""
    if strategy.startswith("resize-gpu"):
        return GPUS
    if strategy.startswith("scale-replicas"):
        return REPLICAS
    if strategy.startswith("set-priority"):
        return PRIORITY_CLASS
    if strategy.startswith("resize-cpu"):
        return CPU
    if strategy.startswith("resize-memory"):
        return MEMORY
    raise ValueError(f"strategy {strategy!r} changes nothing")


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, to the second, as people read it in `kubectl describe`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(raw: object) -> datetime:
    """An RFC 3339 time with an explicit offset; a naive time would be a guess about the zone."""
    if not isinstance(raw, str):
        raise _Invalid(raw)
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError as e:
        raise _Invalid(raw) from e
    if moment.tzinfo is None or moment.year not in _YEARS:  # the local year: converting 9999 to UTC can overflow
        raise _Invalid(raw)
    return moment


def read_state(annotations: Mapping[str, str]) -> ReactorState:
    """Parse the reactor's annotations; never raises, an unparseable key lands in `invalid`."""
    values: dict[str, Any] = {}
    invalid: list[str] = []
    readers = {MODE: ("mode", _mode), LAST_ACTION: ("last_action", _last_action),
               COOLDOWN_UNTIL: ("cooldown_until", parse_time), ORIGINAL: ("original", _original),
               VERIFICATION: ("verification", _verification), REBALANCE: ("rebalance", _rebalance)}
    readers.update({key: (name, _count) for key, name in _COUNTS.items()})
    for key, (name, read) in readers.items():
        if key not in annotations:
            continue
        try:
            values[name] = read(annotations[key])
        except _Invalid:
            invalid.append(key)
    for low, high in _PAIRS:
        lo, hi = values.get(_COUNTS[low]), values.get(_COUNTS[high])
        if lo is not None and hi is not None and lo > hi:
            # Contradictory bounds: which one the person meant is a guess, so neither is used.
            invalid.extend((low, high))
            del values[_COUNTS[low]], values[_COUNTS[high]]
    return ReactorState(**values, invalid=tuple(sorted(invalid)))


def _mode(raw: str) -> Mode:
    try:
        return Mode(raw)
    except ValueError as e:
        raise _Invalid(raw) from e


def _count(raw: str) -> int:
    if not isinstance(raw, str) or not _COUNT.match(raw):
        raise _Invalid(raw)
    return int(raw)


def _json(raw: str) -> Any:
    try:
        return json.loads(raw)
    except (TypeError, ValueError) as e:
        raise _Invalid(raw) from e


def _scalar(raw: object) -> int | str | None:
    """`from` / `to` values: a count, a class name, or null (no class)."""
    if raw is None or (isinstance(raw, str) and len(raw) <= 253):
        return raw
    if isinstance(raw, int) and _is_count(raw):
        return raw
    raise _Invalid(raw)


def _text(doc: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    raw = doc.get(key, None if required else "")
    if not isinstance(raw, str) or (required and not raw):
        raise _Invalid(key)
    return raw


def _last_action(raw: str) -> LastAction:
    doc = _json(raw)
    if not isinstance(doc, dict):
        raise _Invalid(raw)
    direction = _text(doc, "direction")
    container = doc.get("container")
    if direction not in _DIRECTIONS or not (container is None or isinstance(container, str)):
        raise _Invalid(raw)
    before = doc.get("before")
    return LastAction(
        action=_text(doc, "action"),
        direction=direction,
        container=container,
        from_value=_scalar(doc.get("from")),
        to_value=_scalar(doc.get("to")),
        fingerprint=_text(doc, "fingerprint"),
        starts_at=_text(doc, "startsAt"),
        time=parse_time(doc.get("time")),
        alert=_text(doc, "alert", required=False),
        part=_text(doc, "part", required=False),
        before=None if before is None else _original_cpu({"c": before}, most=MAX_BYTES)["c"],
    )


def _verification(raw: str) -> Verification:
    doc = _json(raw)
    if not isinstance(doc, dict) or doc.get("result") not in (PENDING, VERIFIED, REVERTED):
        raise _Invalid(raw)
    strategy = _text(doc, "strategy")
    try:
        original_key(strategy)
    except ValueError as e:
        raise _Invalid(raw) from e
    part = _text(doc, "part", required=False)
    if len(part) > 253:
        raise _Invalid(raw)
    return Verification(result=doc["result"], strategy=strategy, since=parse_time(doc.get("since")),
                        reason=_text(doc, "reason", required=False)[:256], part=part)


_ROLES = frozenset({"donor", "receiver"})


def _rebalance(raw: str) -> Rebalance:
    doc = _json(raw)
    if not isinstance(doc, dict) or doc.get("role") not in _ROLES or not _is_count(doc.get("gpus")):
        raise _Invalid(raw)
    paid = doc.get("paid")
    if paid is not None and not (isinstance(paid, list) and len(paid) == 2 and all(isinstance(p, str) for p in paid)):
        raise _Invalid(raw)
    return Rebalance(role=doc["role"], kind=_text(doc, "kind")[:63], name=_text(doc, "name")[:253],
                     uid=_text(doc, "uid")[:128], gpus=doc["gpus"], quota=_text(doc, "quota")[:253],
                     since=parse_time(doc.get("since")), paid=(paid[0][:64], paid[1][:64]) if paid else None)


def rebalance_annotation(record: Rebalance) -> str:
    """The `rebalance` value: JSON naming the other side (kind, name, uid), the GPUs and quota, and since when; a
    receiver's, the firing whose growth was paid for (`paid`)."""
    doc: dict[str, object] = {"role": record.role, "kind": record.kind, "name": record.name, "uid": record.uid,
                              "gpus": record.gpus, "quota": record.quota, "since": format_time(record.since)}
    if record.paid is not None:
        doc["paid"] = list(record.paid)
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def verification_annotation(result: str, strategy: str, since: datetime, reason: str = "", part: str = "") -> str:
    """The `verification` value: JSON, like `last-action`, sealed with it by the state MAC. `part`: the template
    of an operator's resource the change is on (written only where there is one), so the verifier reads the
    same part the change was decided on."""
    doc = {"result": result, "strategy": strategy, "since": format_time(since), "reason": reason}
    if part:
        doc["part"] = part
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def _original(raw: str) -> Mapping[str, object]:
    doc = _json(raw)
    if not isinstance(doc, dict) or set(doc) - {GPUS, REPLICAS, PRIORITY_CLASS, CPU, MEMORY}:
        raise _Invalid(raw)
    if CPU in doc:
        doc[CPU] = _original_cpu(doc[CPU])
    if MEMORY in doc:
        doc[MEMORY] = _original_cpu(doc[MEMORY], most=MAX_BYTES)
    gpus = doc.get(GPUS, {})
    if not isinstance(gpus, dict) or not all(_is_count(v) for v in gpus.values()):
        raise _Invalid(raw)
    if REPLICAS in doc and not _is_count(doc[REPLICAS]):
        raise _Invalid(raw)
    if PRIORITY_CLASS in doc and not (doc[PRIORITY_CLASS] is None or isinstance(doc[PRIORITY_CLASS], str)):
        raise _Invalid(raw)
    if GPUS in doc:
        doc[GPUS] = MappingProxyType(dict(gpus))
    return MappingProxyType(doc)


def _original_cpu(raw: object, most: int = MAX_COUNT) -> Mapping[str, ComputeResources]:
    """`original.cpu` (`original.memory`): per container, the request (or null) and limit in millicores (bytes,
    at most `most`) it had before."""
    if not isinstance(raw, dict):
        raise _Invalid(raw)
    found = {}
    for name, value in raw.items():
        if not isinstance(value, dict) or set(value) != {"request", "limit"} or not _is_count(value["limit"], most):
            raise _Invalid(raw)
        if value["request"] is not None and not _is_count(value["request"], most):
            raise _Invalid(raw)
        found[name] = ComputeResources(request=value["request"], limit=value["limit"])
    return MappingProxyType(found)


def _is_count(value: object, most: int = MAX_COUNT) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most


def original_value(original: Mapping[str, object], *, strategy: str, container: str | None) -> object:
    """The value recorded before the first change of this strategy's dimension; `KeyError` if none."""
    name = original_key(strategy)
    if name not in _PER_CONTAINER:
        return original[name]
    per_container = original.get(name)
    if not isinstance(per_container, Mapping) or container is None:
        raise KeyError(container)
    return per_container[container]


def state_annotations(
    action: Action, signal: Signal, workload: Workload, cooldown: timedelta, now: datetime
) -> dict[str, str | None]:
    """The bookkeeping to write in the same patch as `action`; a None value deletes the key.

    `original` keeps the first value of each dimension until a revert restores that dimension;
    only the reverted dimension is dropped, so an earlier unreverted change (a shrink) stays on
    record, and the key itself is deleted once nothing is left in it.
    """
    fingerprint, starts_at = signal_key(signal)
    last: dict[str, object] = {
        "action": action.action,
        "direction": action.direction,
        "container": action.container,
        "from": action.from_value,
        "to": action.to_value,
        "alert": signal.alert,
        "fingerprint": fingerprint,
        "startsAt": starts_at,
        "time": format_time(now),
    }
    if workload.part:
        last["part"] = workload.part  # the template the change was made in: a revert touches only that one
    before = action.cpu_before if original_key(action.strategy) == CPU else \
        action.memory_before if original_key(action.strategy) == MEMORY else None
    if before is not None and action.action != "revert":
        last["before"] = {"request": before.request, "limit": before.limit}  # what a revert of it writes back
    original = _next_original(action, workload)
    # Every change is verified after it is written; a revert is not (reverting it would undo the undo).
    pending = None if action.action == "revert" else verification_annotation(PENDING, action.strategy, now,
                                                                             part=workload.part)
    return {
        LAST_ACTION: json.dumps(last, separators=(",", ":"), sort_keys=True),
        COOLDOWN_UNTIL: format_time(_ceil_second(now + cooldown)),
        ORIGINAL: json.dumps(original, separators=(",", ":"), sort_keys=True) if original else None,
        VERIFICATION: pending,
    }


def holds_paid_growth(state: ReactorState) -> bool:
    """Is the last change the growth the `receiver` record says a donor paid for, still in place (not reverted)?
    Both name the firing by `signal_key`, written together: the same spelling. The one answer to what a rebalance
    holds on a receiver: its resolve undoes that growth whatever `revert` says (policy/revert.py), nothing else
    changes on it meanwhile (policy/rails.py `rebalance_held`), and a verifier's revert of it drops the record
    (state/writes.py)."""
    record, last = state.rebalance, state.last_action
    return (record is not None and record.role == "receiver" and record.paid is not None and last is not None
            and last.action != "revert" and (last.fingerprint, last.starts_at) == record.paid)


def signal_key(signal: Signal) -> tuple[str, str]:
    """The firing a decision is recorded under: the signal's own, else its first key."""
    if signal.fingerprint:
        return signal.fingerprint, signal.starts_at
    return signal.keys[0] if signal.keys else ("", "")


def container_key(part: str, container: str | None) -> str | None:
    """The key of a container in `original`: `<part>/<container>` in a resource with several templates (two of
    which may name a container alike), the bare name otherwise."""
    return f"{part}/{container}" if part and container is not None else container


def _next_original(action: Action, workload: Workload) -> dict[str, Any]:
    """`original` after `action`: a change records the value before it, where none is recorded yet (for the
    GPU-hours held back, reactor/observe/finops.py); a revert drops the value only once the dimension is back
    at it (a revert of a later change leaves an earlier, unreverted one on record)."""
    original: dict[str, Any] = {k: (dict(v) if isinstance(v, Mapping) else v)
                                for k, v in workload.state.original.items()}
    for dimension in (CPU, MEMORY):  # back to the JSON shape it was read from
        if dimension in original:
            original[dimension] = {c: {"request": r.request, "limit": r.limit}
                                   for c, r in original[dimension].items()}
    name = original_key(action.strategy)
    key = container_key(workload.part, action.container)
    compute = action.cpu if name == CPU else action.memory if name == MEMORY else None
    written = {"request": compute.request, "limit": compute.limit} if compute is not None else action.to_value
    if action.action == "revert":
        if name in _PER_CONTAINER:
            per_container = original.get(name, {})
            if per_container.get(key) == written:
                per_container.pop(key, None)
            if not per_container:
                original.pop(name, None)
        elif original.get(name) == written:
            original.pop(name, None)
    elif name == GPUS:
        original.setdefault(GPUS, {}).setdefault(key, action.from_value)
    elif name == CPU:
        before = action.cpu_before or ComputeResources()
        original.setdefault(CPU, {}).setdefault(key, {"request": before.request, "limit": before.limit})
    elif name == MEMORY:
        before = action.memory_before or ComputeResources()
        original.setdefault(MEMORY, {}).setdefault(key, {"request": before.request, "limit": before.limit})
    else:
        original.setdefault(name, action.from_value)
    return original


def _ceil_second(moment: datetime) -> datetime:
    """Round up so the written cooldown is never shorter than the policy's."""
    if moment.microsecond == 0:
        return moment
    return moment + timedelta(microseconds=1_000_000 - moment.microsecond)

