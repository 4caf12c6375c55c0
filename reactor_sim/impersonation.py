"""User impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`, `Impersonate-Extra-*`), as
k8s.io/apiserver's WithImpersonation filter does it after authentication: each requested attribute must be
allowed to the real user by the `impersonate` verb (users, groups, serviceaccounts in the core group; uids and
userextras in authentication.k8s.io), and the request then runs as the impersonated user.

This decides who the request acts as; what that user may do is still RBAC's decision (rbac.authorize).
"""

from __future__ import annotations

from collections.abc import Callable

from reactor_sim import rbac
from reactor_sim.authn import AUTHENTICATED, SA_GROUP, UNAUTHENTICATED, User
from reactor_sim.routing import RequestInfo
from reactor_sim.status import ApiError
from reactor_sim.store import Store

USER, GROUP, UID, EXTRA = "Impersonate-User", "Impersonate-Group", "Impersonate-Uid", "Impersonate-Extra-"
AUTH_GROUP = "authentication.k8s.io"
ANONYMOUS = "system:anonymous"
# get_all(name) -> every value of a header (several Impersonate-Group lines), as http.client's message offers.
Headers = Callable[[str], list[str]]


def requested(names: list[str]) -> bool:
    """Whether the request asks for impersonation at all."""
    return any(n.lower().startswith(EXTRA.lower()) or n.lower() in (USER.lower(), GROUP.lower(), UID.lower())
               for n in names)


def impersonate(store: Store, real: User, headers: Headers, names: list[str]) -> User:
    """The user the request acts as; ApiError 403 when an attribute is not the real user's to take, 500 for
    groups, uid or extras without a user (upstream answers that with InternalError)."""
    name = (headers(USER) or [""])[0]
    groups = [g for g in headers(GROUP) if g]
    uid = (headers(UID) or [""])[0]
    extras = [(n[len(EXTRA):].lower(), v) for n in names if n.lower().startswith(EXTRA.lower()) for v in headers(n)]
    checks = _checks(name, groups, uid, extras)
    if not name:
        asked = ", ".join(f"{i.resource} {i.name}" for i in checks)
        raise ApiError(500, "InternalError",
                       f"Internal error occurred: requested [{asked}] without impersonating a user",
                       {"causes": [{"message": f"requested [{asked}] without impersonating a user"}]})
    for info in checks:
        allowed, reason = rbac.authorize(store, real, info)
        if not allowed:
            raise rbac.forbidden(real, info, reason)
    return User(name, tuple(_groups(name, groups)))


def _checks(name: str, groups: list[str], uid: str, extras: list[tuple[str, str]]) -> list[RequestInfo]:
    """One `impersonate` authorization per requested attribute (the legacy impersonation filter's list)."""
    out: list[RequestInfo] = []
    if name:
        sa = User(name, ()).service_account
        if sa is not None:
            out.append(_info("serviceaccounts", sa[1], namespace=sa[0]))
        else:
            out.append(_info("users", name))
    out += [_info("groups", g) for g in groups]
    out += [_info("userextras", value, group=AUTH_GROUP, subresource=key) for key, value in extras]
    if uid:
        out.append(_info("uids", uid, group=AUTH_GROUP))
    return out


def _info(resource: str, name: str, *, namespace: str = "", group: str = "", subresource: str = "") -> RequestInfo:
    return RequestInfo(path="", verb="impersonate", resource_request=True, api_group=group,
                       api_version="v1" if group else "", namespace=namespace, resource=resource,
                       subresource=subresource, name=name)


def _groups(name: str, groups: list[str]) -> list[str]:
    """Requested groups are the authority; a ServiceAccount without any gets its fixed groups; then
    system:authenticated unless either all-users group is there (system:unauthenticated for anonymous)."""
    out = list(groups)
    sa = User(name, ()).service_account
    if sa is not None and not out:
        out = [SA_GROUP, f"{SA_GROUP}:{sa[0]}"]
    if name == ANONYMOUS:
        return out if UNAUTHENTICATED in out else [*out, UNAUTHENTICATED]
    return out if AUTHENTICATED in out or UNAUTHENTICATED in out else [*out, AUTHENTICATED]
