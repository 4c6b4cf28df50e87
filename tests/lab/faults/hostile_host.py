"""A hostile GPU host's service: terminal control sequences in every channel the cockpit reads.

It runs itself again from a copy of its interpreter whose path carries an OSC 2 sequence (systemd
refuses such a name in ExecStart, but not in the exec of a program it started), so `comm`,
nvidia-smi's process name and ss's process name all show it:

- as `hostile.service` (HOSTILE_ROLE unset) it prints a plain line and a traceback whose file,
  function and message carry OSC 2 (title), OSC 52 (clipboard), OSC 8 (a link), the C1 form
  of OSC, BEL and a bidirectional override, then waits forever in a function whose code object
  carries them too (py-spy reads the file and function names from the process);
- as `hostile-holder.service` (HOSTILE_ROLE=hold) it holds stand-in GPU memory (the lab's
  nvidia-smi reads COCKPIT_STANDIN_GPU_MIB from its environment) and listens on the port that
  hostile.service names, so the write modal's host check and `k` name it.

Every marker holds PWNED: a test reads the raw bytes a terminal got and finds no PWNED inside a
control sequence, only in its escaped, visible form.
"""

import os
import socket
import sys
import threading
import time

ESC, BEL, ST = "\x1b", "\x07", "\x1b\\"
EXE = f"/opt/sglang/venv/bin/{ESC}]2;PWNED-exe{BEL}py"  # beside the venv's python: its site-packages
TITLE = f"{ESC}]2;PWNED-title{BEL}"
CLIPBOARD = f"{ESC}]52;c;UFdORUQtY2xpcA=={BEL}"  # base64 of PWNED-clip
LINK = f"{ESC}]8;;http://pwned.invalid/{ST}PWNED-link{ESC}]8;;{ST}"
C1 = "\x9d2;PWNED-c1\x9c"  # OSC and ST as 8-bit controls
EVIL = f"{TITLE}{CLIPBOARD}{LINK}{C1}{BEL}\u202eDENWP"


def hold(port: int) -> None:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen()
    while True:
        time.sleep(3600)


def serve() -> None:
    print(f"hostile plain line {EVIL}", flush=True)
    print("Traceback (most recent call last):", flush=True)
    print(f'  File "/opt/evil/{TITLE}model.py", line 7, in load{CLIPBOARD}', flush=True)
    print(f"    raise ValueError({LINK!r})", flush=True)
    print(f"ValueError: {EVIL}", flush=True)
    print(f"after the traceback {C1}", flush=True)
    threading.current_thread().name = f"main{TITLE}"
    source = "def wait():\n    while True:\n        time.sleep(1)\n"
    namespace: dict = {"time": time}
    exec(compile(source, f"/opt/evil/{TITLE}frame.py", "exec"), namespace)
    wait = namespace["wait"]
    wait.__code__ = wait.__code__.replace(co_name=f"wait{CLIPBOARD}", co_qualname=f"wait{CLIPBOARD}")
    wait()


if __name__ == "__main__":
    if sys.executable != EXE:
        os.execv(EXE, [EXE, "-m", "hostile_host", *sys.argv[1:]])
    if os.environ.get("HOSTILE_ROLE") == "hold":
        hold(int(sys.argv[sys.argv.index("--port") + 1]))
    else:
        serve()
