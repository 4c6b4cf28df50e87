"""A hostile host's text reaches no terminal as a control sequence (issue 24, point 1).

`hostile_host.py` runs in the lab from an interpreter whose path carries OSC 2, and prints OSC 2,
OSC 52, OSC 8, their 8-bit C1 forms, BEL and a bidirectional override in a journal line, a
traceback (file, function, message) and its own stack (py-spy's frames), its model's config.json
names a class that is one, and a second unit of it holds the first one's GPUs and port (nvidia-smi's
and ss's process names). Every headless command that reads those channels runs on a pty and the
raw bytes it wrote are read; the app runs in tmux with `pipe-pane`, which hands over the bytes
the app wrote to its pty before tmux reads them, while the keys walk the journal, the folded
traceback, the source pane, the stacks screen, the write modal and `k`'s confirmation. No byte
may start a control sequence other than the app's own CSI, tmux's pane title and clipboard stay
untouched, and every marker is on screen in its escaped form.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LabHandle
from tests.lab.faults.hostile_host import EXE

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
HERE = Path(__file__).parent
DIR = "/etc/systemd/system"
SERVE, HOLD = "hostile.service", "hostile-holder.service"
DEMO = "sglang-demo.service"
PORT = 30123
MODEL = "/opt/evil-model"
ARCH = "\x1b]2;PWNED-arch\x07ForCausalLM"
# A byte that starts a control sequence or acts as one (the CSI an app draws with is allowed
# where the caller says so; tab, CR and LF are a terminal's plain movements).
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
TEXTUALS_OWN_OSC = re.compile("\x1b\\]22;[a-z-]*\x07")  # the mouse pointer's shape (kitty's OSC 22)
NOT_CSI = re.compile("\x1b[^\\[]|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def unit_text(role: str) -> str:
    """The Description's control bytes are the file's own (systemd takes them as they are)."""
    hold = role == "hold"
    return (
        f"[Unit]\nDescription=hostile {role} \x1b]2;PWNED-description\x07\n[Service]\n"
        "Environment=PYTHONUNBUFFERED=1 PYTHONPATH=/opt/cockpit-lab/units\n"
        + ("Environment=HOSTILE_ROLE=hold COCKPIT_STANDIN_GPU_MIB=1000 COCKPIT_STANDIN_GPUS=0,1\n" if hold else "")
        + f"ExecStart=/opt/sglang/venv/bin/python -m hostile_host --model-path {MODEL} --tp-size 2 --port {PORT}\n"
    )


@pytest.fixture(scope="module")
def hostile(fault_lab: LabHandle) -> Iterator[LabHandle]:
    from cockpit.lab.lab import Lab

    units = Lab(fault_lab.name).units_dir
    (units / "hostile_host.py").write_text((HERE / "hostile_host.py").read_text())
    fault_lab.ssh("sh", "-c", 'cp "$(readlink -f /opt/sglang/venv/bin/python)" "$1"', "sh", EXE)
    fault_lab.ssh("mkdir", "-p", MODEL)
    config = {"architectures": [ARCH], "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4}
    fault_lab.ssh("tee", f"{MODEL}/config.json", input=json.dumps(config))
    fault_lab.ssh("tee", f"{DIR}/{SERVE}", input=unit_text("serve"))
    fault_lab.ssh("tee", f"{DIR}/{HOLD}", input=unit_text("hold"))
    fault_lab.ssh("systemctl", "daemon-reload")
    # The lab's own stand-in holds every GPU too: its two ✗ lines would push the port's holder
    # below the write modal's fold (CI run on trixie), so only the hostile units hold anything.
    fault_lab.ssh("systemctl", "stop", DEMO)
    fault_lab.ssh("systemctl", "start", HOLD, SERVE)
    fault_lab.wait_for_line(SERVE, "after the traceback")
    try:
        yield fault_lab
    finally:
        fault_lab.ssh("systemctl", "stop", SERVE, HOLD, check=False)
        fault_lab.ssh("systemctl", "start", DEMO, check=False)
        fault_lab.ssh("rm", "-rf", f"{DIR}/{SERVE}", f"{DIR}/{HOLD}", MODEL, EXE, check=False)
        fault_lab.ssh("systemctl", "daemon-reload", check=False)
        (units / "hostile_host.py").unlink(missing_ok=True)


def on_pty(argv: list[str], timeout: float = 180) -> tuple[int, str]:
    """Run `argv` with stdout and stderr on a pty; (exit status, every byte it wrote, decoded)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer has closed the pty
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    code = proc.wait(timeout=30)
    return code, out.decode("utf-8", "surrogateescape")


def assert_no_control(what: str, raw: str, allow_csi: bool = False) -> None:
    found = (NOT_CSI if allow_csi else CONTROL).search(raw)
    assert found is None, f"{what} wrote a control: {raw[max(0, found.start() - 60) : found.end() + 60]!r}"


def test_headless_commands_write_the_hosts_controls_escaped(hostile: LabHandle) -> None:
    lab = hostile.name
    said: dict[str, str] = {}
    for name, argv in {
        "status": ["status", "--host", lab, "--unit", SERVE],
        "status --json": ["status", "--host", lab, "--unit", SERVE, "--json"],
        "stacks": ["stacks", "--host", lab, "--unit", SERVE],
        "stacks --json": ["stacks", "--host", lab, "--unit", SERVE, "--json"],
        "preflight": ["preflight", "--host", lab, "--unit", SERVE, "--static-only"],
        "preflight --json": ["preflight", "--host", lab, "--unit", SERVE, "--static-only", "--json"],
    }.items():
        _, raw = on_pty([COCKPIT, *argv])
        assert_no_control(f"cockpit {name}", raw)
        said[name] = raw
    assert "\\u001b]2;PWNED-description\\u0007" in said["status --json"]
    assert "\\x1b]2;PWNED-frame" in said["stacks"] or "\\x1b]2;PWNED-title\\x07frame.py" in said["stacks"]
    assert "PWNED-title" in said["stacks --json"]
    assert "\\x1b]2;PWNED-arch\\x07ForCausalLM" in said["preflight"]
    assert "\\u001b]2;PWNED-arch\\u0007ForCausalLM" in said["preflight --json"]
    parsed = json.loads(said["preflight --json"].replace("\r\n", "\n"))
    assert any(ARCH in f["message"] for f in parsed)  # the same data, only written inertly


def test_fold_and_explain_of_the_hosts_journal_write_it_escaped(hostile: LabHandle, tmp_path: Path) -> None:
    export = tmp_path / "hostile.jsonl"
    export.write_text(hostile.ssh("journalctl", "-u", SERVE, "-o", "json", "--all", "--no-pager").stdout)
    _, raw = on_pty([COCKPIT, "fold", str(export)])
    assert_no_control("cockpit fold", raw)
    assert "ValueError: \\x1b]2;PWNED-title\\x07" in raw
    _, raw = on_pty([COCKPIT, "fold", "--json", str(export)])
    assert_no_control("cockpit fold --json", raw)
    traceback = tmp_path / "traceback.txt"
    traceback.write_text(hostile.ssh("journalctl", "-u", SERVE, "-o", "cat", "--no-pager").stdout)
    _, raw = on_pty([COCKPIT, "explain", str(traceback), "--host", hostile.name])
    assert_no_control("cockpit explain", raw)
    assert "PWNED" in raw


def test_the_snapshot_escapes_the_note_and_keeps_the_pictures(hostile: LabHandle, tmp_path: Path) -> None:
    code, raw = on_pty([COCKPIT, "snapshot", "--host", hostile.name, "--unit", SERVE, "--out", str(tmp_path)])
    assert code == 0, raw
    assert_no_control("cockpit snapshot", raw)
    [note] = tmp_path.rglob("incident.md")
    text = note.read_text()
    assert_no_control("incident.md", text.replace("\n", ""))
    assert "ValueError: \\x1b]2;PWNED-title\\x07" in text
    for svg in note.parent.glob("*.svg"):
        ET.parse(svg)  # valid XML: a raw ESC made the parser (and rsvg-convert) refuse it
        assert (svg.with_suffix(".png")).stat().st_size > 0, f"{svg.name} has no PNG"


def tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, check=True).stdout


def modal_text(screen: str) -> str:
    """What stands between a modal's side borders (the half blocks Textual draws), lines joined by a space."""
    inside = [line.split("█")[1] for line in screen.splitlines() if line.count("█") >= 2]
    return re.sub(r"\s+", " ", " ".join(inside))


def test_the_app_in_a_terminal_writes_no_control_of_the_hosts(hostile: LabHandle, tmp_path: Path) -> None:
    socket, raw_log = f"hostile-{os.getpid()}", tmp_path / "raw.bin"
    tmux(socket, "-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", "50", "sh")
    try:
        tmux(socket, "set-option", "-g", "set-clipboard", "on")
        tmux(socket, "pipe-pane", "-o", f"cat > {raw_log}")
        tmux(socket, "send-keys", f"env -u COLUMNS -u LINES {COCKPIT} --host {hostile.name} --unit {SERVE}", "Enter")

        def screen() -> str:
            return tmux(socket, "capture-pane", "-p")

        def wait_for(text: str, timeout: float = 60) -> str:
            deadline = time.monotonic() + timeout
            while text not in (shown := screen()):
                assert time.monotonic() < deadline, f"{text!r} never came:\n{shown}"
                time.sleep(0.3)
            return shown

        def wait_in_modal(text: str, timeout: float = 60) -> str:
            """The modal's paragraphs as one line: where they wrap hangs on the PID's and host's lengths."""
            deadline = time.monotonic() + timeout
            while text not in (body := modal_text(shown := screen())):
                assert time.monotonic() < deadline, f"{text!r} never came:\n{shown}"
                time.sleep(0.3)
            return body

        def escape() -> None:
            """Esc alone: a key sent right after it would reach the app as Alt+key."""
            tmux(socket, "send-keys", "Escape")
            time.sleep(0.5)

        wait_for("plain line \\x1b]2;PWNED-title\\x07")
        wait_for("ValueError: \\x1b]2;PWNED-title")
        # Folded first: the app may have unfolded the latest traceback itself, and Enter on an
        # unfolded one folds it. Then Enter on it unfolds it with the cursor on its failing frame.
        tmux(socket, "send-keys", "z")
        wait_for("▶ ValueError: \\x1b]2;PWNED-title")
        tmux(socket, "send-keys", "[")  # the traceback
        tmux(socket, "send-keys", "Enter")
        wait_for("▼ ValueError: \\x1b]2;PWNED-title")
        wait_for('/opt/evil/\\x1b]2;PWNED-title\\x07model.py"')
        tmux(socket, "send-keys", "Enter")  # the frame: outside the roots, said by path
        wait_for("a traceback can name any file")  # outside the roots (or any package dir until read)
        escape()
        tmux(socket, "send-keys", "s")  # the stacks screen
        wait_for("PySpyDump: idle in wait")
        escape()
        tmux(socket, "send-keys", "e")  # the flag editor, one change, the write modal
        wait_for("SGLang 0.5.23 flags")
        tmux(socket, "send-keys", "a")
        wait_for("add a flag")
        tmux(socket, "send-keys", "-l", "mem-fraction-static")
        wait_for("--mem-fraction-static")  # offered in the list
        tmux(socket, "send-keys", "Enter")
        time.sleep(1)  # the value's prompt takes the next keys
        tmux(socket, "send-keys", "-l", "0.5")
        tmux(socket, "send-keys", "Enter")
        wait_for("1 change not yet written")
        tmux(socket, "send-keys", "w")
        wait_for("Write hostile.service on")
        body = wait_in_modal("hostile.service's --port")  # the host check has named the port's holder
        assert "\\x1b]2;PWNED-exe\\x07" in body.split("Write hostile.service on", 1)[1]
        tmux(socket, "send-keys", "k")  # what `k` would end, by name (never confirmed here)
        time.sleep(2)
        shown = screen()
        for _ in range(3):
            escape()
        tmux(socket, "send-keys", "C-q")
        time.sleep(2)
        title = tmux(socket, "display-message", "-p", "#{pane_title}")
        buffers = tmux(socket, "list-buffers")
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
    raw = raw_log.read_bytes().decode("utf-8", "surrogateescape")
    assert "PWNED" in raw  # the channels were fed
    assert_no_control("the app", TEXTUALS_OWN_OSC.sub("", raw), allow_csi=True)
    assert "PWNED" not in title and "PWNED" not in buffers  # tmux took no title and no clipboard
    assert "\\x1b]2;PWNED-exe\\x07" in shown
