"""The worker's malloc arenas are capped (bounded RSS after large notifications), measured with glibc's own
`malloc_info`, in a fresh process each time: eight threads allocating at once get their own arenas by default,
and share two once `limit_malloc_arenas` ran. An operator's MALLOC_ARENA_MAX wins."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.process,
              pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                 reason="glibc only: elsewhere the cap is a no-op by design")]

PROBE = r"""
import ctypes, ctypes.util, sys, tempfile, threading
from reactor.app.arenas import limit_malloc_arenas
took = limit_malloc_arenas() if sys.argv[1] == "limit" else False
start = threading.Barrier(8)
kept = []
def work():
    start.wait()  # all at once: contention is what makes glibc hand out new arenas
    for _ in range(3000):
        kept.append(bytes(2000))  # above pymalloc's 512 bytes: malloc's arenas
threads = [threading.Thread(target=work) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.fopen.restype, libc.fopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes, libc.fclose.argtypes = [ctypes.c_int, ctypes.c_void_p], [ctypes.c_void_p]
path = tempfile.mktemp()
f = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, f)
libc.fclose(f)
print(took, open(path).read().count("<heap nr="))
"""


def _arenas(mode: str, **env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60,
                          env={**clean, **env}, check=True)
    took, heaps = done.stdout.split()
    return took, int(heaps)


def test_eight_busy_threads_share_two_arenas_once_capped() -> None:
    took, heaps = _arenas("limit")
    assert (took, heaps) == ("True", 2)
    assert _arenas("default")[1] > 2  # the probe can see the difference: glibc's default hands out more


def test_an_operators_malloc_arena_max_is_left_alone() -> None:
    took, heaps = _arenas("limit", MALLOC_ARENA_MAX="3")
    assert took == "False" and heaps <= 3
