"""Bearer-token authentication: each token names a user and its groups, as kube-apiserver's token
authenticators and its group adder do.

A ServiceAccount's user also carries the ServiceAccount groups, and its token stops working once the
ServiceAccount object is gone; a TokenRequest token (`Binding`) also ends at its expiry, with a recreated
account (another uid) and with the Pod or Secret it is bound to. Every authenticated user is in
`system:authenticated`. This module decides who is asking, never what they may do.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from reactor_sim.store import Store

SA_PREFIX = "system:serviceaccount:"
SA_GROUP = "system:serviceaccounts"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...]

    @property
    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) for `system:serviceaccount:NS:NAME`, else None."""
        if not self.name.startswith(SA_PREFIX):
            return None
        namespace, sep, name = self.name[len(SA_PREFIX):].partition(":")
        return (namespace, name) if sep and namespace and name and ":" not in name else None


def make_user(name: str, groups: Iterable[str] = ()) -> User:
    """The user as the authenticator chain hands it on: ServiceAccount groups, then system:authenticated."""
    if not name:
        raise ValueError("a user needs a name")
    out = list(groups)
    sa = User(name, ()).service_account
    if name.startswith(SA_PREFIX) and sa is None:
        raise ValueError(f"not a ServiceAccount user name (system:serviceaccount:NAMESPACE:NAME): {name!r}")
    if sa is not None:
        out += [SA_GROUP, f"{SA_GROUP}:{sa[0]}"]
    out.append(AUTHENTICATED)
    return User(name, tuple(dict.fromkeys(out)))


@dataclass(frozen=True, slots=True)
class Binding:
    """What a TokenRequest token stays valid for: its ServiceAccount (by uid, so a recreated account does not
    inherit it), until it expires, and while the object it is bound to (a Pod or Secret) exists."""

    account_uid: str
    expires: datetime
    bound: tuple[str, str, str, str] | None = None  # (plural, namespace, name, uid)

    def valid(self, store: Store, account: tuple[str, str], now: datetime) -> bool:
        sa = store.get("serviceaccounts", account[0], account[1])
        if sa is None or sa["metadata"].get("uid") != self.account_uid or now >= self.expires:
            return False
        if self.bound is None:
            return True
        plural, namespace, name, uid = self.bound
        obj = store.get(plural, namespace, name)
        return obj is not None and obj["metadata"].get("uid") == uid


class Tokens:
    """token -> user; thread-safe, as tests add tokens while the server runs."""

    def __init__(self) -> None:
        self._users: dict[str, User] = {}
        self._bindings: dict[str, Binding] = {}
        self._lock = threading.Lock()

    def add(self, token: str, user: User, binding: Binding | None = None) -> None:
        if not token or any(c.isspace() for c in token):
            raise ValueError("a bearer token must be non-empty and contain no whitespace")
        if binding is not None and user.service_account is None:
            raise ValueError("only a ServiceAccount's token can be bound")
        with self._lock:
            self._users[token] = user
            if binding is not None:
                self._bindings[token] = binding

    def remove(self, token: str) -> None:
        with self._lock:
            self._users.pop(token, None)

    def authenticate(self, authorization: str | None, store: Store, now: datetime | None = None) -> User | None:
        """The user behind an `Authorization: Bearer …` header, or None (a 401)."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        with self._lock:
            user, binding = self._users.get(token), self._bindings.get(token)
        if user is None:
            return None
        sa = user.service_account
        if sa is not None and not store.exists("serviceaccounts", sa[0], sa[1]):
            return None
        if sa is not None and binding is not None and not binding.valid(store, sa, now or datetime.now(UTC)):
            return None
        return user
