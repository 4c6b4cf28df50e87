"""`cockpit fold --json` on real journals: scenario services crash in the lab's systemd.

Each scenario is a Python script run as a transient unit (`systemd-run`) under Debian's
Python 3.11. Before printing a traceback it writes down what it is about to print: the PID
journald will stamp the lines with, the rank prefix, the exact lines, and Python's own
account of the exception (`tests/data/fold/truth.py`). The test exports the unit's journal
with `journalctl -o json --all`, folds it with the subcommand, and asserts that every
traceback comes back whole, with exactly those frames and exception, attributed to the
right PID and rank, and that every line of the export lands in exactly one record.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections import Counter
from pathlib import Path

import msgspec
import pytest

from cockpit.cli import fold as cli
from cockpit.systemd.entry import LEFT_OUT
from cockpit.traceback import Folder, Traceback, fold_lines
from tests.conftest import ROOT, LabHandle
from tests.data.fold.checks import assert_every_line_once, assert_same

pytestmark = pytest.mark.lab

DATA = ROOT / "tests" / "data" / "fold"

PRELUDE = r'''
import io, json, os, socket, sys, time, traceback
sys.path.insert(0, "/opt/fold")
from crashes import *
from truth import describe_exception, printed

TRUTH = sys.argv[1]


def truth(rank, lines, exc, pid=None, described=None):
    """Write down a traceback before printing it, as journald will store it: journald cuts
    whitespace off the end of a line and drops the lines that are left empty."""
    piece = {"pid": pid or os.getpid(), "rank": rank, "lines": [line.rstrip() for line in lines if line.rstrip()],
             "truth": described or describe_exception(exc)}
    with open(os.path.join(TRUTH, f"{time.monotonic_ns()}-{os.getpid()}.json"), "w") as f:
        json.dump(piece, f)


def stamp(rank=None):
    now = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"[{now} {rank}]" if rank else f"[{now}]"


def logged(rank, exc):
    """SGLang's `logger.error(f"Scheduler hit an exception: {traceback.format_exc()}")`."""
    return f"{stamp(rank)} Scheduler hit an exception: {''.join(traceback.format_exception(exc))}\n"


def lines(text):
    return text.split("\n")[:-1]


def uncaught_with_truth(rank=None):
    """Let the interpreter print uncaught exceptions itself, and note what it printed."""
    def hook(kind, exc, tb):
        real, sys.stderr = sys.stderr, io.StringIO()
        try:
            sys.__excepthook__(kind, exc, tb)
        finally:
            text, sys.stderr = sys.stderr.getvalue(), real
        truth(rank, lines(text), exc)
        real.write(text)
        real.flush()
    sys.excepthook = hook


def own_journal_stream(identifier):
    """fds 1 and 2 on a journald stream of this process's own, as `systemd-cat` does:
    journald stamps a stream's lines with the PID that opened it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect("/run/systemd/journal/stdout")
    sock.sendall(f"{identifier}\n\n6\n0\n0\n0\n0\n".encode())
    os.dup2(sock.fileno(), 1)
    os.dup2(sock.fileno(), 2)
    sock.close()
'''

SCENARIOS = {
    "one": r"""
uncaught_with_truth()
print(f"{stamp()} starting one process", flush=True)
resolve(Cfg())
""",
    "eight": r"""
import multiprocessing as mp

barrier = mp.Barrier(8)


def rank(k):
    own_journal_stream(f"fold-eight-tp{k}")
    cfg = Cfg()
    cfg.speculative_num_draft_tokens = k
    exc = raised(chained) if k % 2 else raised(resolve, cfg)
    text = logged(f"TP{k}", exc)
    truth(f"TP{k}", lines(text), exc)
    barrier.wait()
    for line in lines(text):  # line by line, so the eight crashes interleave in the journal
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        time.sleep(0.002)
    os._exit(1)


workers = [mp.Process(target=rank, args=(k,)) for k in range(8)]
for w in workers:
    w.start()
for w in workers:
    w.join()
print(f"{stamp()} every rank exited", flush=True)
sys.exit(1)
""",
    "shared": r"""
import multiprocessing as mp

# journald stamps each write with its writer's PID, so the ranks write into a pipe that the
# main process copies to the journal: as under a launcher or container runtime that relays
# its children's output, every line carries one PID.
barrier = mp.Barrier(8)
lock = mp.Lock()
main = os.getpid()
relay_in, relay_out = os.pipe()


def rank(k):
    exc = raised(group) if k in (2, 5) else raised(chained) if k % 2 else raised(resolve, Cfg())
    text = logged(f"TP{k}", exc)
    truth(f"TP{k}", lines(text), exc, pid=main)
    barrier.wait()
    with lock:  # whole records, as one logging call writes them
        os.write(relay_out, text.encode())
    os._exit(1)


workers = [mp.Process(target=rank, args=(k,)) for k in range(8)]
for w in workers:
    w.start()
os.close(relay_out)
while chunk := os.read(relay_in, 65536):
    os.write(1, chunk)
for w in workers:
    w.join()
sys.exit(1)
""",
    "chained": r"""
uncaught_with_truth()
print(f"{stamp()} chained", flush=True)
chained()
""",
    "group": r"""
exc = group_handled()
truth(None, printed(exc), exc)
traceback.print_exception(exc)
print(f"{stamp()} and now an uncaught one", flush=True)
uncaught_with_truth()
group()
""",
    "syntax": r"""
import subprocess
exc = raised(syntax)
truth(None, printed(exc), exc)
traceback.print_exception(exc)
path = "/tmp/fold-broken.py"
with open(path, "w") as f:
    f.write("print('never runs')\nx = (1,\n")
try:
    compile(open(path).read(), path, "exec")
except SyntaxError as e:
    broken = e
described = describe_exception(broken)
described["frames"] = []  # only the location (its own field): the script never ran
shown = subprocess.run([sys.executable, path], capture_output=True, text=True).stderr
print(f"{stamp()} running the broken script", flush=True)
child = subprocess.Popen([sys.executable, path])  # journald stamps its lines with its own PID
child.wait()
truth(None, lines(shown), broken, pid=child.pid, described=described)
sys.exit(1)
""",
    "noise": r"""
import warnings
print("Loading safetensors: 10%\rLoading safetensors: 60%\rLoading safetensors: 100%", flush=True)
os.write(1, b"caf\xe9 bytes \xff\xfe\n")
print("y" * 100_000, flush=True)
warnings.warn("a UserWarning with its source line after it")
print('  File "/app/handler.py", line 3, in handle', flush=True)
print(f"{stamp()} a log line after a line that only looks like a frame", flush=True)
print("Traceback (most recent call last): is what this line says, mid-sentence", flush=True)
exc = raised(cuda)
text = logged("TP0", exc)
truth("TP0", lines(text), exc)
sys.stdout.write(text)
sys.stdout.flush()
print('INFO:     127.0.0.1:40000 - "GET /health HTTP/1.1" 200 OK', flush=True)
""",
    "restart": r"""
count = "/tmp/fold-restart-count"
n = int(open(count).read()) if os.path.exists(count) else 0
with open(count, "w") as f:
    f.write(str(n + 1))
if n >= 3:
    print(f"{stamp()} healthy after {n} crashes", flush=True)
    sys.exit(0)
uncaught_with_truth()
print(f"{stamp()} attempt {n + 1}", flush=True)
resolve(Cfg())
""",
}
# systemd-run properties beyond the defaults
PROPERTIES = {"restart": ["Restart=on-failure", "RestartSec=200ms"]}


def run_fold_cli(capsysbinary, path: Path) -> list[dict]:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command"))
    capsysbinary.readouterr()
    assert cli.run(parser.parse_args(["fold", str(path), "--json"])) == 0
    return [msgspec.json.decode(line) for line in capsysbinary.readouterr().out.splitlines()]


def messages(export: bytes) -> list[str]:
    out = []
    for line in export.splitlines():
        m = msgspec.json.decode(line)["MESSAGE"]
        text = bytes(m).decode("utf-8", "replace") if isinstance(m, list) else (m or "")
        out += text.split("\n")
    return out


def install_scenarios(lab: LabHandle) -> LabHandle:
    lab.ssh("mkdir", "-p", "/opt/fold")
    for name in ("crashes.py", "truth.py"):
        lab.ssh("tee", f"/opt/fold/{name}", input=(DATA / name).read_text())
    return lab


@pytest.fixture(scope="module")
def fold_lab(lab: LabHandle) -> LabHandle:
    return install_scenarios(lab)


def run_scenario(lab: LabHandle, name: str, tmp_path: Path) -> tuple[bytes, list[dict]]:
    """Run the scenario as `fold-NAME.service`; its journal export and its ground truth."""
    unit = f"fold-{name}"
    truth_dir = f"/tmp/fold-truth-{name}"
    lab.ssh("rm", "-rf", truth_dir, "/tmp/fold-restart-count")
    lab.ssh("mkdir", "-p", truth_dir)
    lab.ssh("tee", f"/tmp/{unit}.py", input=PRELUDE + SCENARIOS[name])
    last = msgspec.json.decode(lab.ssh("journalctl", "-n", "1", "-o", "json", "--no-pager").stdout)["__CURSOR"]
    props = [f"--property={p}" for p in ["StandardOutput=journal", "StandardError=journal", *PROPERTIES.get(name, [])]]
    lab.ssh(
        "systemd-run",
        f"--unit={unit}",
        "--wait",
        "--collect",
        "--quiet",
        "--setenv=PYTHONUNBUFFERED=1",
        *props,
        "/usr/bin/python3",
        f"/tmp/{unit}.py",
        truth_dir,
        check=False,
        timeout=120,
    )
    lab.wait_for(
        lambda: lab.ssh("systemctl", "show", "-P", "ActiveState", unit).stdout.strip() in ("inactive", "failed"),
        what=f"{unit} to finish",
    )  # a restart loop included
    pieces = [
        json.loads(text)
        for text in lab.ssh(
            "sh", "-c", f'for f in {shlex.quote(truth_dir)}/*.json; do cat "$f"; echo; done'
        ).stdout.split("\n")
        if text
    ]
    wanted = Counter(line for piece in pieces for line in piece["lines"])

    def export() -> bytes:
        return lab.ssh(
            "journalctl", "-u", unit, f"--after-cursor={last}", "-o", "json", "--all", "--no-pager"
        ).stdout.encode()  # this run only

    # journald may still be reading the last lines of the streams when the unit is gone
    lab.wait_for(lambda: not wanted - Counter(messages(export())), what=f"the journal of {unit}")
    data = export()
    (tmp_path / f"{unit}.json").write_bytes(data)
    return data, pieces


def check(records: list[dict], export: bytes, pieces: list[dict]) -> list[dict]:
    """Each written-down traceback is one record with its exact lines and structure."""
    found = [r for r in records if r["kind"] == "traceback"]
    assert len(found) == len(pieces), [(r["pid"], r["rank"], r["lines"][:1]) for r in found]
    for piece in pieces:
        matches = [
            r for r in found if r["pid"] == piece["pid"] and r["rank"] == piece["rank"] and r["lines"] == piece["lines"]
        ]
        assert len(matches) == 1, (piece["pid"], piece["rank"], piece["lines"][:2])
        assert matches[0]["complete"] is True
        assert_same(matches[0], piece["truth"])
    folder_lines = [line for r in records for line in (r["lines"] if r["kind"] == "traceback" else [r["text"]])]
    assert sorted(folder_lines) == sorted(messages(export))
    return found


def fold_records(export: bytes) -> Folder:
    return fold_lines(export.splitlines())


@pytest.mark.parametrize("name", ["one", "chained", "group", "syntax"])
def test_single_process_scenarios(fold_lab: LabHandle, tmp_path: Path, capsysbinary, name: str) -> None:
    export, pieces = run_scenario(fold_lab, name, tmp_path)
    assert pieces, "the scenario wrote down no traceback"
    records = run_fold_cli(capsysbinary, tmp_path / f"fold-{name}.json")
    found = check(records, export, pieces)
    assert_every_line_once(messages(export), fold_records(export).records)
    if name == "chained":
        assert [c["relation"] for c in found[0]["chained"]] == ["cause", "context"]
    if name == "group":
        assert found[0]["lines"][0].startswith("  | ExceptionGroup:")  # a group without a traceback
        assert [s["exception"] for s in found[1]["sub_exceptions"]][-1] == "ExceptionGroup"
    if name == "syntax":
        assert found[1]["lines"][0].startswith('  File "/tmp/fold-broken.py", line 2')  # no header


def test_eight_processes_crashing_at_once_interleave_and_fold_apart(
    fold_lab: LabHandle, tmp_path: Path, capsysbinary
) -> None:
    export, pieces = run_scenario(fold_lab, "eight", tmp_path)
    assert len({p["pid"] for p in pieces}) == 8
    pids = [msgspec.json.decode(line).get("_PID") for line in export.splitlines()]
    for piece in pieces:  # the lines really did interleave in the journal
        mine = [i for i, pid in enumerate(pids) if pid == str(piece["pid"])]
        assert any(pids[i] != str(piece["pid"]) for i in range(mine[0], mine[-1]))
    records = run_fold_cli(capsysbinary, tmp_path / "fold-eight.json")
    found = check(records, export, pieces)
    assert sorted(r["rank"] for r in found) == [f"TP{k}" for k in range(8)]
    assert_every_line_once(messages(export), fold_records(export).records)


def test_eight_ranks_sharing_one_pid_fold_apart_by_prefix(fold_lab: LabHandle, tmp_path: Path, capsysbinary) -> None:
    export, pieces = run_scenario(fold_lab, "shared", tmp_path)
    assert len({p["pid"] for p in pieces}) == 1 and len(pieces) == 8
    records = run_fold_cli(capsysbinary, tmp_path / "fold-shared.json")
    found = check(records, export, pieces)
    assert sorted(r["rank"] for r in found) == [f"TP{k}" for k in range(8)]
    assert_every_line_once(messages(export), fold_records(export).records)


def test_noise_stays_plain_lines_around_the_one_traceback(fold_lab: LabHandle, tmp_path: Path, capsysbinary) -> None:
    export, pieces = run_scenario(fold_lab, "noise", tmp_path)
    records = run_fold_cli(capsysbinary, tmp_path / "fold-noise.json")
    [tb] = check(records, export, pieces)
    assert tb["message"].count("\n") == 2  # the CUDA message's three lines, no more
    texts = [r["text"] for r in records if r["kind"] == "line"]
    assert "Loading safetensors: 10%\rLoading safetensors: 60%\rLoading safetensors: 100%" in texts
    assert "caf\ufffd bytes \ufffd\ufffd" in texts
    assert sum(len(t) for t in texts if set(t) == {"y"}) == 100_000  # journald splits it at LineMax
    assert '  File "/app/handler.py", line 3, in handle' in texts
    assert any(t.endswith("UserWarning: a UserWarning with its source line after it") for t in texts)
    assert any(t.startswith("INFO:") for t in texts)
    assert_every_line_once(messages(export), fold_records(export).records)


def test_restart_loop_gives_one_traceback_per_crash(fold_lab: LabHandle, tmp_path: Path, capsysbinary) -> None:
    export, pieces = run_scenario(fold_lab, "restart", tmp_path)
    assert len(pieces) == 3 and len({p["pid"] for p in pieces}) == 3
    records = run_fold_cli(capsysbinary, tmp_path / "fold-restart.json")
    check(records, export, pieces)
    folder = fold_records(export)
    tracebacks = [r for r in folder.records if isinstance(r, Traceback)]
    assert len({tb.invocation_id for tb in tracebacks}) == 3  # each crash is its own invocation
    assert any("healthy after 3 crashes" in line for line in messages(export))
    assert_every_line_once(messages(export), folder.records)


def test_an_export_without_all_says_what_journalctl_left_out(fold_lab: LabHandle, tmp_path: Path, capsysbinary) -> None:
    """Issue 26, item 6: journalctl without --all sends a field over 4096 bytes as null, and
    fold showed those lines as blank rows and said nothing. Each row now says what was left out
    and stderr says how to export the whole message."""
    run_scenario(fold_lab, "noise", tmp_path)
    bare = fold_lab.ssh("journalctl", "-u", "fold-noise", "-o", "json", "--no-pager").stdout.encode()
    nulls = sum(1 for line in bare.splitlines() if msgspec.json.decode(line).get("MESSAGE") is None)
    assert nulls > 0  # journalctl's own: the 100,000 y's come as null without --all
    path = tmp_path / "bare.json"
    path.write_bytes(bare)
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command"))
    capsysbinary.readouterr()
    assert cli.run(parser.parse_args(["fold", str(path)])) == 0
    out, err = capsysbinary.readouterr()
    assert out.decode().count(LEFT_OUT) == nulls
    assert err.decode() == (
        f"cockpit: {nulls} journal entr{'y' if nulls == 1 else 'ies'} came without "
        f"{'its' if nulls == 1 else 'their'} message (journalctl sends a field over 4096 bytes only with --all): "
        "export with `journalctl -o json --all` to see them whole.\n"
    )
