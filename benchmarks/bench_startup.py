"""From typing `cockpit` to the unit's state on screen, against `ssh host systemctl status`, and
`cockpit status` against plain ssh (issue 14, item 5; issue 29, item 3). Prints JSON.

The real command, as a user starts it, on a terminal: `cockpit --host LAB --unit
sglang-demo.service` runs in a pseudo-terminal of 160x50 that this process reads as a terminal
would, so Textual's real driver writes its frames there. Figures, each over `--runs` launches:

- `first_paint_s`: from the fork to the first thing drawn that names the unit: the early state
  line (cockpit/ui/early_state.py) when the master's answer beats the app's first frame, else
  that frame.
- `state_on_screen_s`: from the fork to the unit's state (`active (running)`) on screen: the
  connection made, the first `systemctl show` read and drawn (by the early line or the app).
- `app_frame_s`: from the fork to the app's first frame (the journal pane's title): Textual and
  the app imported, the screen composed and drawn. The whole cockpit is there from then on.
- The launches after the first find the OpenSSH master the first one ran remembered, as a user's
  second launch of a unit does (cockpit/remote/early_master.py: the command forks it before it
  imports the cockpit). `first_launch_state_s` and `first_launch_app_frame_s` are the same
  command with a state directory of its own, as the first launch on a new unit is.
- `ssh_status_s`: `ssh -F <lab ssh_config> LAB systemctl status UNIT`, what an engineer types
  instead, run after each launch; `state_over_ssh` is the ratio of the medians.
- `import_s`: `import cockpit.ui.app` alone, in a fresh interpreter.
- `status_s` and `ssh_show_s`: `cockpit status --json` and what an engineer types through ssh
  for what it says, the unit's state and whether it serves: `ssh -F <lab ssh_config> LAB
  'systemctl show UNIT; GET /health'` (bash's /dev/tcp, the lab has no curl), alternated;
  `status_over_ssh` is the ratio of their medians. SGLang 0.5.23's /health generates a token and
  looks for it once a second, so both take a second more than `systemctl show` alone (the
  stand-in does the same): against that alone the ratio said 5.8, a second neither can avoid.

Each round runs each of these once, in this order, so the machine's load at a moment weighs
on all of them alike.

The command is the cockpit as the README installs it (`pip install .`): a wheel of this working
tree, installed by pip (which compiles its bytecode) into a virtual environment of its own in a
temporary directory, its dependencies this interpreter's (a `.pth` names their directory). The
checkout's editable install costs each start what a user's never does: its import hook
(`pathlib`, `re` and more, 14 to 16 ms of `site` before the first line of the cockpit) and,
where $PYTHONDONTWRITEBYTECODE is set (this machine sets it), a compile of every module. The
first launch, not counted, leaves the memory the later ones start their master from. The lab
is one of its own (`bench-start-<4 hex>`, or `--lab NAME`), reused across the
launches as a user's host is, and taken down after. Needs root (the lab).

The launches begin once the lab's server answers /health with 200, as a user's settled host
does (about 6 s after the lab is up). Begun as soon as sshd answered, the first counted launch
shared the two cores with the server's start and took 0.28 to 0.44 s in twelve runs where the
later ones took 0.24 to 0.26, and the ssh it is compared with runs after it, on a host at rest.

`--pin` puts the lab's processes on CPU 1 and this process, the launches and the ssh compared
with them on CPU 0 once the lab's server answers, as on a jump box whose host is elsewhere
(`bench_app_flood.py --pin`). Unpinned, the cockpit's import shares the two cores with the
host's sshd while it logs in, and the ssh it is compared with has them to itself; `pinned` in
the JSON says which it was.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import secrets
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import sysconfig
import tempfile
import termios
import time
from pathlib import Path

from _common import ROOT, emit, lab_up
from bench_ssh_transport import pin

UNIT = "sglang-demo.service"
ANSI = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def installed(where: Path) -> Path:
    """The `bin` directory of a virtual environment at `where` holding the cockpit as `pip
    install .` would: a wheel built from a copy of the working tree's package (in the tree,
    setuptools' `build/` could carry modules since deleted), its dependencies those of this
    interpreter (a `.pth` naming their directory, whose editable hook it does not run)."""
    source = where / "source"
    shutil.copytree(ROOT / "cockpit", source / "cockpit", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    pip, quiet = [sys.executable, "-m", "pip"], ["-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", *quiet, "--no-deps", "-w", str(where / "wheel"), str(source)], check=True)
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "cockpit_bench_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    wheels = [str(p) for p in (where / "wheel").glob("*.whl")]
    subprocess.run([*pip, "--python", str(python), "install", *quiet, "--no-deps", "--no-index", *wheels], check=True)
    return venv / "bin"


APP_FRAME = f"journal · {UNIT}".encode()  # the journal pane's title: only the app draws it


def environment(state: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(TERM="xterm-256color", COLORTERM="truecolor", COLUMNS="160", LINES="50")
    if state is not None:
        env["XDG_STATE_HOME"] = state
    return env


def launch(cockpit: str, lab: str, timeout: float = 30, *, state: str | None = None) -> tuple[float, float, float]:
    """(first paint, state on screen, the app's first frame) in seconds from the fork, of one
    launch of the command `cockpit` (`installed`) in a pty; with `state`, a state directory of
    its own (a first launch: no master remembered)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the cockpit on this terminal
        os.execve(cockpit, [cockpit, "--host", lab, "--unit", UNIT], environment(state))
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    start = time.perf_counter()
    seen = b""
    painted = state = frame = None
    try:
        while (state is None or frame is None) and time.perf_counter() - start < timeout:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                break
            if not data:
                break
            seen += ANSI.sub(b"", data)
            now = time.perf_counter() - start
            if painted is None and UNIT.encode() in seen:
                painted = now
            if state is None and painted is not None and b"active (running)" in seen:
                state = now
            if frame is None and APP_FRAME in seen:
                frame = now
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                select.select([fd], [], [], 0.05)
                os.read(fd, 1 << 16)
            except OSError:
                pass
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    if painted is None or state is None or frame is None:
        missing = "unit" if painted is None else "state" if state is None else "frame of its own"
        raise RuntimeError(f"the cockpit drew no {missing} within {timeout:.0f} s")
    return painted, state, frame


# The health answer's status line (bash's /dev/tcp), and with the state, in one login (the
# module's docstring).
HEALTH = "exec 3<>/dev/tcp/127.0.0.1/30000 && printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3 && head -1 <&3"
SHOW_AND_HEALTH = f"systemctl show {UNIT}; {HEALTH}"


def settled(ssh_config: str, lab: str, timeout: float = 120) -> None:
    """Once the lab's server answers /health with 200 (the module's docstring)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        said = subprocess.run(["ssh", "-F", ssh_config, lab, HEALTH], capture_output=True, text=True, check=False)
        if " 200 " in said.stdout:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the lab's server did not answer /health with 200 within {timeout:.0f} s")


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment(), check=False)
    return time.perf_counter() - start


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--lab", help="the lab to bring up, use and take down (default: bench-start-<4 hex>)")
    parser.add_argument("--pin", action="store_true", help="the lab on CPU 1, the launches on CPU 0 (the docstring)")
    args = parser.parse_args()
    name = args.lab or f"bench-start-{secrets.token_hex(2)}"
    place = tempfile.TemporaryDirectory(prefix="bench-start-")
    bin_dir = installed(Path(place.name))
    cockpit, python = str(bin_dir / "cockpit"), str(bin_dir / "python")
    lab = lab_up(name)
    try:
        ssh_config = str(lab.ssh_config)
        settled(ssh_config, name)
        pinned = pin(lab) if args.pin else None
        launch(cockpit, name)  # the memory the later launches start their master from (see the docstring)
        paints, states, frames, ssh_status, imports, status, plain = [], [], [], [], [], [], []
        first_states, first_frames = [], []
        for _ in range(args.runs):
            painted, state, frame = launch(cockpit, name)
            paints.append(painted)
            states.append(state)
            frames.append(frame)
            with tempfile.TemporaryDirectory() as fresh:
                _, state, frame = launch(cockpit, name, state=fresh)
            first_states.append(state)
            first_frames.append(frame)
            ssh_status.append(timed(["ssh", "-F", ssh_config, name, "systemctl", "status", UNIT]))
            imports.append(timed([python, "-c", "import cockpit.ui.app"]))
            status.append(timed([cockpit, "status", "--host", name, "--unit", UNIT, "--json"]))
            plain.append(timed(["ssh", "-F", ssh_config, name, SHOW_AND_HEALTH]))
        emit(
            {
                "benchmark": "startup",
                "runs": args.runs,
                "first_paint_s": median(paints),
                "first_paint_s_max": round(max(paints), 3),
                "state_on_screen_s": median(states),
                "state_on_screen_s_max": round(max(states), 3),
                "app_frame_s": median(frames),
                "ssh_status_s": median(ssh_status),
                "state_over_ssh": round(statistics.median(states) / statistics.median(ssh_status), 2),
                "app_frame_over_ssh": round(statistics.median(frames) / statistics.median(ssh_status), 2),
                "first_launch_state_s": median(first_states),
                "first_launch_state_over_ssh": round(
                    statistics.median(first_states) / statistics.median(ssh_status), 2
                ),
                "first_launch_app_frame_s": median(first_frames),
                "import_s": median(imports),
                "status_s": median(status),
                "ssh_show_s": median(plain),
                "status_over_ssh": round(statistics.median(status) / statistics.median(plain), 2),
                "all": {
                    "first_paint_s": paints,
                    "state_on_screen_s": states,
                    "app_frame_s": frames,
                    "first_launch_state_s": first_states,
                    "first_launch_app_frame_s": first_frames,
                    "ssh_status_s": ssh_status,
                    "import_s": imports,
                    "status_s": status,
                    "ssh_show_s": plain,
                },
                "cpus": os.cpu_count(),
                "pinned": None if pinned is None else {"lab_cpu": 1, "app_cpu": 0, "lab_processes": pinned},
                "root": str(ROOT),
                "command": "a wheel of the working tree, installed by pip in a venv of its own",
            }
        )
    finally:
        lab.down()
        place.cleanup()


if __name__ == "__main__":
    main()
