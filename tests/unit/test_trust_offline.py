"""The offline halves of the trust fixes (issue 11): config mistakes as one sentence, the fold
that streams, the cache that never deletes a tree in use, the linear unit parser, backup names,
the known_hosts files OpenSSH reads, the Python roots, and the status pane's honesty."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from cockpit.cli import main
from cockpit.cli.fold import Printer, stream_fold
from cockpit.localfs import STALE_PREFIX, build_once, is_complete, remove_stale
from cockpit.remote.base import RunResult
from cockpit.remote.source import PACKAGE_DIRS, SourceRoots
from cockpit.remote.ssh import GLOBAL_KNOWN_HOSTS, USER_KNOWN_HOSTS, known_hosts_files
from cockpit.remote.sudo import explain_failure
from cockpit.systemd import unit_args
from cockpit.systemd.deploy import backup_name
from cockpit.systemd.status import parse_show
from cockpit.systemd.unit_syntax import parse_unit_file

COCKPIT = str(Path(sys.executable).with_name("cockpit"))


# -- config mistakes: one sentence, exit 2 ------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("a = " + "[" * 3000 + "1" + "]" * 3000 + "\n", "nested too deeply to read"),
        (
            '[hosts.a]\njump = "b"\n[hosts.b]\njump = "c"\n[hosts.c]\njump = "a"\n',
            "2: hosts.a.jump: the jump hosts make a loop: a -> b -> c -> a",
        ),
    ],
)
def test_a_bad_config_is_one_sentence_and_exit_2(tmp_path: Path, capsys, text: str, expected: str) -> None:
    cfg = tmp_path / "cockpit.toml"
    cfg.write_text(text)
    assert main(["--config", str(cfg), "status", "--host", "a", "--unit", "x"]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_config_that_is_a_directory_is_one_sentence(tmp_path: Path, capsys) -> None:
    assert main(["--config", str(tmp_path), "status", "--host", "a", "--unit", "x"]) == 2
    assert capsys.readouterr().err == f"cockpit: {tmp_path}: is a directory, not a config file.\n"


# -- cockpit fold streams -------------------------------------------------------------------------


def _export(n: int, every: int = 500) -> bytes:
    out = []
    for i in range(n):
        if i % every == 0:
            for j, line in enumerate(
                ("Traceback (most recent call last):", '  File "/x/y.py", line 3, in f', "    g()", "ValueError: bad")
            ):
                out.append(
                    b'{"__CURSOR":"t%d-%d","MESSAGE":"%s","_PID":"7","PRIORITY":"3"}'
                    % (i, j, line.replace('"', '\\"').encode())
                )
        out.append(b'{"__CURSOR":"c%d","MESSAGE":"line %d","_PID":"%d","PRIORITY":"6"}' % (i, i, 100 + i % 8))
    return b"\n".join(out) + b"\n"


class _Trickle(io.RawIOBase):
    """A pipe that hands out its data in small reads and records how much printing it saw
    before each read: a streamer prints long before the input ends."""

    def __init__(self, data: bytes, out: io.BytesIO) -> None:
        self.data, self.pos, self.out, self.seen = data, 0, out, []

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        self.seen.append(len(self.out.getvalue()))
        chunk = self.data[self.pos : self.pos + min(len(b), 4096)]
        b[: len(chunk)] = chunk
        self.pos += len(chunk)
        return len(chunk)


def test_fold_prints_each_record_as_it_settles() -> None:
    out = io.BytesIO()
    data = _export(20_000)
    stream = _Trickle(data, out)
    stream_fold(io.BufferedReader(stream, 4096), Printer(out, as_json=True))
    half = len(stream.seen) // 2
    assert stream.seen[half] > len(out.getvalue()) // 4  # half-way through the input, much was printed
    lines = out.getvalue().splitlines()
    assert len(lines) == 20_000 + 40 and lines[0].startswith(b'{"kind":"traceback"')


def test_fold_memory_is_bounded_by_the_open_traceback_not_the_input() -> None:
    small, large = _export(20_000), _export(200_000)
    peaks = []
    for data in (small, large):
        tracemalloc.start()
        with open(os.devnull, "wb") as sink:
            stream_fold(io.BufferedReader(io.BytesIO(data)), Printer(sink, as_json=False))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 2 * peaks[0] + (1 << 20), peaks  # ten times the input, about the same memory


def test_fold_stops_quietly_when_the_reader_stops(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    path.write_bytes(_export(200_000))
    proc = subprocess.run(f"{COCKPIT} fold {path} | head -3", shell=True, capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == b"" and len(proc.stdout.splitlines()) == 3


def test_fold_escapes_control_characters_and_shows_odd_messages(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_bytes(
        b'{"MESSAGE": 42}\n{"MESSAGE": {"k": [1]}}\n{"MESSAGE": "esc \\u001b[2J nul \\u0000"}\n'
        b"plain \x1b]0;title\x07 text\n"
    )
    proc = subprocess.run([COCKPIT, "fold", str(path)], capture_output=True, timeout=30)
    assert proc.stdout.decode().splitlines() == [
        "42",
        '{"k":[1]}',
        "esc \\x1b[2J nul \\x00",
        "plain \\x1b]0;title\\x07 text",
    ]


# -- the caches a running lab boots from ----------------------------------------------------------


def test_concurrent_builds_of_one_cache_never_delete_it(tmp_path: Path) -> None:
    target = tmp_path / "images" / "abc"
    made: list[str] = []

    def make(work: Path) -> None:
        made.append(threading.current_thread().name)
        time.sleep(0.3)
        (work / "rootfs").mkdir()
        (work / "rootfs" / "file").write_text(threading.current_thread().name)

    threads = [threading.Thread(target=build_once, args=(target, make, "k"), name=f"t{i}") for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and is_complete(target)  # the others waited, then took the first one's
    with open(target / "rootfs" / "file") as reader:  # a running lab holds it
        build_once(target, make, "k")
        assert (target / "rootfs" / "file").read_text() == made[0] and reader.read() == made[0]


def test_an_incomplete_leftover_is_moved_aside_not_deleted(tmp_path: Path) -> None:
    target = tmp_path / "abc"
    (target / "rootfs").mkdir(parents=True)
    (target / "rootfs" / "in-use").write_text("x")  # no `complete` marker
    build_once(target, lambda work: (work / "rootfs").mkdir(), "k")
    [aside] = list(tmp_path.glob(f"{STALE_PREFIX}*"))
    assert (aside / "rootfs" / "in-use").read_text() == "x" and is_complete(target)
    assert remove_stale(tmp_path) == [aside] and not aside.exists()


# -- the unit parser is linear -------------------------------------------------------------------


class _CountingArgv(list):
    sliced = 0

    def __getitem__(self, index):
        if isinstance(index, slice):
            _CountingArgv.sliced += len(range(*index.indices(len(self))))
        return super().__getitem__(index)


def test_reading_flags_does_not_copy_the_rest_of_the_command_per_flag() -> None:
    argv = _CountingArgv(
        ["/usr/bin/python3", "-m", "sglang.launch_server"] + [w for i in range(4000) for w in (f"--flag-{i}", str(i))]
    )
    _CountingArgv.sliced = 0
    head, items = unit_args.parse_items(argv)
    assert len(items) == 4000 and _CountingArgv.sliced <= 4 * len(argv)


def test_a_long_continued_exec_line_reads_in_linear_time() -> None:
    def cpu_seconds(flags: int) -> float:
        text = (
            "[Service]\nExecStart=/usr/bin/python3 -m x \\\n"
            + "".join(f"    --flag-{i} {i} \\\n" for i in range(flags))
            + "    --last 1\n"
        )
        start = time.process_time()
        parse_unit_file("/x.service", text)
        return time.process_time() - start

    cpu_seconds(1000)
    small, large = min(cpu_seconds(5000) for _ in range(2)), min(cpu_seconds(40000) for _ in range(2))
    assert large < 16 * small + 0.05, (small, large)  # linear: 8x; the old quadratic join: over 40x


# -- small things ----------------------------------------------------------------------------------


def test_backup_names_never_collide_and_sort_by_time() -> None:
    stamp = 1796120000.25
    names = {backup_name("/etc/systemd/system/a.service", stamp) for _ in range(200)}
    assert len(names) == 200
    assert backup_name("/a", 1796120000.999999) < backup_name("/a", 1796120001.000001)
    assert ".cockpit-bak.20261201T" in next(iter(names))


def test_openssh_known_hosts_defaults_and_none() -> None:
    class Cfg(dict):
        pass

    user, global_ = known_hosts_files(Cfg())
    assert [str(p) for p in user] == [str(Path(p).expanduser()) for p in USER_KNOWN_HOSTS]
    assert [str(p) for p in global_] == list(GLOBAL_KNOWN_HOSTS)
    user, global_ = known_hosts_files(Cfg(UserKnownHostsFile=[], GlobalKnownHostsFile=["/etc/x"]))
    assert user == [] and [str(p) for p in global_] == ["/etc/x"]


@pytest.mark.parametrize(
    "stderr,expected",
    [
        (
            b"install: error writing '/etc/systemd/system/.a.tmp': No space left on device",
            "`install` failed on lab: no space left on device (/etc/systemd/system)",
        ),
        (
            b"mv: cannot move 'x' to '/etc/systemd/system/a.service': Read-only file system",
            "`mv` failed on lab: read-only file system (/etc/systemd/system)",
        ),
    ],
)
def test_disk_trouble_is_named(stderr: bytes, expected: str) -> None:
    argv = ["sudo", "-n", stderr.split(b":")[0].decode(), "-m", "0644", "/tmp/x", "/etc/systemd/system/a.service"]
    assert explain_failure("lab", "operator", argv, RunResult(tuple(argv), 1, b"", stderr)) == expected


def test_the_python_roots_hold_their_own_files_only() -> None:
    roots = SourceRoots(("/opt/venv/lib/python3.11/site-packages", "/usr/lib/python3.11", "/srv/app"))
    assert roots.holds("/opt/venv/lib/python3.11/site-packages/sglang/srt/server_args.py")
    assert roots.holds("/srv/app/main.py")
    assert not roots.holds("/root/secret.txt")
    assert not roots.holds("/srv/application/x.py")  # a prefix of a name is not a directory
    assert not roots.holds("/srv/app/../../root/secret.txt")
    assert not roots.holds("relative/path.py")
    assert PACKAGE_DIRS.holds("/any/venv/lib/python3.13/site-packages/x.py")
    assert not PACKAGE_DIRS.holds("/root/site-packages")  # a file named like the directory


async def test_a_service_python_that_prints_json_nested_too_deep_gives_no_roots(tmp_path: Path) -> None:
    """The service's own interpreter says where it imports from; one that printed a list nested
    100,000 deep raised RecursionError out of reading the unit's deployment."""
    from cockpit.remote.local import LocalHost
    from cockpit.systemd.remote_unit import service_python

    python = tmp_path / "python3"
    python.write_text("#!/bin/sh\nprintf '%0100000d' 0 | tr 0 '['\nprintf '%0100000d\\n' 0 | tr 0 ']'\n")
    python.chmod(0o755)
    found = await service_python(LocalHost(), str(python))
    assert (found.purelib, found.roots) == (None, PACKAGE_DIRS)  # only site-packages, as with no answer


def test_a_hostile_description_parses(tmp_path: Path) -> None:
    text = "Id=a.service\nDescription=bad \x1e\x1b[2J\x00 text\nActiveState=active\nSubState=running\nMainPID=12\n"
    [status] = parse_show(text, "lab")
    assert status.description == "bad \x1e\x1b[2J\x00 text" and status.main_pid == 12


def test_source_lines_are_numbered_as_python_numbers_them() -> None:
    from cockpit.textlines import source_lines

    text = "a = 1\n\x0c\ndef f():\x1c\n    assert x\r\nb = 2\rc = 3\n"
    lines = source_lines(text)
    assert lines[3] == "    assert x" and len(lines) == 6  # str.splitlines() would say line 6
    assert source_lines("no newline") == ["no newline"]
