"""Fewer malloc arenas: the webhook's memory stays bounded after large notifications.

glibc gives a thread that allocates while others do an arena of its own (up to 8 per CPU) and keeps each
arena's high-water mark. The webhook's threads each parse a large notification now and then, so the worker's
RSS would grow by one peak per thread that ever met one: measured by `make bench`, the webhook runs after the
storm added +14 MB with glibc's default and +3 MB with two arenas. Two is what many Python services set
(`MALLOC_ARENA_MAX=2`); the reactor's threads mostly wait on the network, so contention on the two is low.

glibc reads `MALLOC_ARENA_MAX` itself at start: when it is set, that choice stands and nothing is done here.
Where there is no glibc (musl, macOS), `mallopt` is missing or ignores the option: nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_ARENA_MAX = -8  # glibc's malloc.h
ARENAS = 2


def limit_malloc_arenas(count: int = ARENAS) -> bool:
    """Cap glibc's arenas for the rest of the process (and the workers it forks); True when glibc took it."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, count))



def release_free_memory() -> bool:
    """Give the heap's free pages back to the system (glibc `malloc_trim(0)`); True when glibc did.

    After the watch cache's first lists the worker has freed far more than it keeps (each page's parsed objects),
    but glibc keeps freed memory mapped for reuse: the RSS would stay at the lists' peak. The informers call this
    after each list (reactor/cluster/informer.py `after_list`). Without glibc: nothing is done.
    """
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return bool(trim(0))
