"""A child's process title as setproctitle sets SGLang's (`sglang::scheduler_TP3`): its command
line is the title alone and its `comm` the title's first 15 bytes (`sglang::schedul`), which is
what `ps`, journald's `_COMM` and the cockpit's census read (tests/data/sglang-0.5.23/
real-tp1-processes.txt). Standard library only: the lab's stand-in has nothing else.
"""

from __future__ import annotations

import ctypes
import sys


def take_title() -> None:
    """Give this process the title it was started under (its argv[0], as the server's `_child`
    passes it), in place of the `-m cockpit.lab.standin.worker ...` that follows: setproctitle's
    way, over the kernel's own copy of argv, whose bounds /proc/self/stat gives."""
    title = sys.orig_argv[0].encode()
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # from field 3 (state) on
    arg_start, arg_end = int(fields[45]), int(fields[46])  # fields 48 and 49
    title = title[: arg_end - arg_start - 1]
    ctypes.memset(arg_start, 0, arg_end - arg_start)
    ctypes.memmove(arg_start, title, len(title))
    with open("/proc/self/comm", "wb") as f:
        f.write(title[:15])
