"""Knative's names for the objects it makes: knative.dev/pkg kmeta/names.go `ChildName`, ported line for line.

Knative Serving names a Revision `ChildName(configuration, "-%05d")` and its Deployment
`ChildName(revision, "-deployment")` (serving knative-v1.23.0, which pins knative.dev/pkg 521cb33b33dd). Where
the plain concatenation would pass Kubernetes' 63 characters, ChildName cuts the parent and puts the md5 of it
between (or, for a suffix of 31 characters or more, hashes the whole), so a reactor that expected `parent + suffix`
refused every long-named InferenceService's Deployment as not Knative's. Go strings are bytes: so is this port.
Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import re

LONGEST = 63  # the longest name Kubernetes supports (a DNS label)
MD5_LEN = 32
HEAD = LONGEST - MD5_LEN  # how much of the parent is kept to fit the hash
_ALPHANUMERIC = re.compile(rb"^[a-zA-Z0-9]*$")


def child_name(parent: str, suffix: str) -> str:
    """kmeta.ChildName(parent, suffix): `parent + suffix` where it fits in 63 characters; else the parent cut and its
    md5 (hex) before the suffix; where the suffix leaves no room for that (31 characters or more), the parent's first
    31 characters, the md5 of parent + suffix, then as much of the suffix as fits, any trailing character that is
    not a letter or digit removed (makeValidName)."""
    p, s = parent.encode(), suffix.encode()
    n = p
    if len(p) > LONGEST - len(s):
        if HEAD - len(s) <= 0:
            digest = hashlib.md5(p + s, usedforsecurity=False).hexdigest().encode()
            if len(p) > HEAD:
                p = p[:HEAD]
            ret = p + digest
            if (room := LONGEST - len(ret)) > 0:
                ret += s[:room]
            return _valid_name(ret).decode()
        n = p[:HEAD - len(s)] + hashlib.md5(p, usedforsecurity=False).hexdigest().encode()
    return (n + s).decode()


def _valid_name(n: bytes) -> bytes:
    """makeValidName: a name cut short must not end in a character other than a letter or digit."""
    while n and not _ALPHANUMERIC.match(n[-1:]):
        n = n[:-1]
    return n
