"""Shared fixtures: the real data in ../shared, real SGLang sources, the stand-in, the lab."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(
    os.environ.get("COCKPIT_SHARED")
    or (ROOT.parent / "shared" if (ROOT.parent / "shared" / "fixtures").is_dir() else ROOT / "tests" / "shared")
)
FIXTURES = SHARED / "fixtures"
# The test lab's name comes from the checkout, so two `make test` runs of two checkouts never
# share a lab; COCKPIT_TEST_LAB names it (two runs of one checkout at once need two names).
# COCKPIT_LAB_RELEASE=trixie runs the lab tests on a Debian 13 lab (`make test` does both).
LAB_RELEASE = os.environ.get("COCKPIT_LAB_RELEASE", "bookworm")
TEST_LAB = os.environ.get("COCKPIT_TEST_LAB") or (
    f"ct-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]}" + ("" if LAB_RELEASE == "bookworm" else "-t")
)
LAB_PYTHON = {"bookworm": "python3.11", "trixie": "python3.13"}[LAB_RELEASE]
LAB_SITE = f"/opt/sglang/venv/lib/{LAB_PYTHON}/site-packages"  # where the lab's SGLang source is

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
os.environ["TZ"] = "UTC"  # journal times in snapshots
time.tzset()


async def until(predicate: Callable[[], object], timeout: float, what: object = "timed out") -> None:
    """Poll `predicate` until it holds; fail with `what` (shown as it is then, whole: pytest cuts
    an object's repr in a failure to a line) after `timeout` s."""
    import asyncio
    import pprint

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what if isinstance(what, str) else pprint.pformat(what, width=160)
        await asyncio.sleep(0.1)


def pytest_configure(config: pytest.Config) -> None:
    if not FIXTURES.is_dir():
        raise pytest.UsageError(f"the shared fixtures are missing: {FIXTURES} (set COCKPIT_SHARED)")
    _reach_the_labs(config)


def _reach_the_labs(config: pytest.Config) -> None:
    """Tests build `SSHHost(HostConfig(name=lab.name))` directly, below the session that would
    hand the labs' ssh_config to the host pool: one ssh_config that includes every lab's, on
    $COCKPIT_SSH_CONFIG, reaches the labs the tests boot (a test that sets the variable itself
    replaces it for that test)."""
    from cockpit.lab.paths import state_root

    fd, include = tempfile.mkstemp(prefix="cockpit-test-ssh_config-")
    with os.fdopen(fd, "w") as f:
        f.write(f"Include {state_root()}/*/ssh_config\n")
    config.add_cleanup(lambda: os.unlink(include))
    os.environ["COCKPIT_SSH_CONFIG"] = ":".join(p for p in (os.environ.get("COCKPIT_SSH_CONFIG"), include) if p)


LAB_FIXTURES = {"lab", "fault_lab", "four_labs"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses a lab is a lab test, wherever it lives: `-m "not lab"` runs none of them.
    Lab tests belong in tests/lab, which marks each by where it lives (tests/lab/conftest.py);
    tests/unit/test_layering.py checks that `-m lab` finds none elsewhere."""
    for item in items:
        if LAB_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.lab)


@pytest.fixture(autouse=True)
def private_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attempts, runs and the remembered theme go to a fresh directory, never the user's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(scope="session")
def sglang_root() -> callable:
    """`sglang_root("0.5.23")`: a directory holding that release's real `sglang` package source."""
    from cockpit.sglang.catalog.releases import sglang_source

    def get(version: str) -> Path:
        return sglang_source(version, progress=lambda m: None)

    return get


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class StandinProcess:
    proc: subprocess.Popen
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def standin(tmp_path: Path, sglang_root) -> Iterator[callable]:
    """Start the stand-in on loopback: `standin(*flags, env={...})`; stopped after the test."""
    started: list[StandinProcess] = []

    def start(
        *flags: str, env: dict[str, str] | None = None, version: str = "0.5.23", wait_ready: bool = True
    ) -> StandinProcess:
        port = free_port()
        log_path = tmp_path / f"standin-{port}.log"
        full_env = dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            PYTHONUNBUFFERED="1",
            COCKPIT_STANDIN_SGLANG_ROOT=str(sglang_root(version)),
            COCKPIT_STANDIN_STARTUP_S="0.2",
            COCKPIT_STANDIN_ACCESS_LOG="0",
        )
        full_env.update(env or {})
        model = ROOT / "cockpit" / "lab" / "guest" / "models" / "Llama-3.1-8B-Instruct"
        argv = [
            sys.executable,
            "-m",
            "cockpit.lab.standin",
            "--model-path",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *flags,
        ]
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=full_env)
        sp = StandinProcess(proc, f"http://127.0.0.1:{port}", log_path)
        started.append(sp)
        if wait_ready:
            deadline = time.monotonic() + 20
            while "ready to roll" not in sp.log():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the stand-in did not get ready:\n{sp.log()[-2000:]}")
                time.sleep(0.05)
        return sp

    yield start
    for sp in started:
        if sp.proc.poll() is None:
            sp.proc.send_signal(signal.SIGINT)  # at once; SIGTERM drains, up to 5 s as SGLang's does
            try:
                sp.proc.wait(5)
            except subprocess.TimeoutExpired:
                sp.proc.kill()
                sp.proc.wait()


# --- the lab ------------------------------------------------------------------------------


@dataclass
class LabHandle:
    name: str
    info: object

    def ssh(
        self, *command: str, user: str = "root", check: bool = True, timeout: float = 60, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        from cockpit.lab.lab import Lab

        argv = Lab(self.name).ssh_argv(user, list(command))
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def wait_for(self, predicate: callable, timeout: float = 30, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            time.sleep(0.2)

    def wait_ready(self, unit: str = "sglang-demo", timeout: float = 60) -> None:
        """Until the unit's running start has printed its ready line (an earlier test may have
        restarted it: a stand-in stops in about 6 s and starts in about 4)."""

        def ready() -> bool:
            show = self.ssh("systemctl", "show", "-p", "ActiveState,InvocationID", unit, check=False).stdout
            props = dict(line.split("=", 1) for line in show.splitlines() if "=" in line)
            if props.get("ActiveState") != "active" or not props.get("InvocationID"):
                return False
            said = self.ssh("journalctl", f"_SYSTEMD_INVOCATION_ID={props['InvocationID']}", "-o", "cat", check=False)
            return "ready to roll" in said.stdout

        self.wait_for(ready, timeout, f"{unit}'s running start ready")

    def wait_for_line(self, unit: str, text: str, timeout: float = 30, *since: str) -> None:
        """Until `text` is in the unit's journal (`since`: journalctl's `--since` and its time)."""
        self.wait_for(
            lambda: text in self.ssh("journalctl", "-u", unit, *since, "-o", "cat", check=False).stdout,
            timeout,
            f"{text!r} in {unit}'s journal",
        )


@pytest.fixture(scope="session")
def lab() -> Iterator[LabHandle]:
    """The test lab, up once per session and down at the end (root and systemd-nspawn needed)."""
    from cockpit.lab.lab import Lab

    if os.geteuid() != 0:
        raise AssertionError("the lab tests need root: run `make test` as root")
    handle = Lab(TEST_LAB)
    info = handle.up(progress=lambda m: print(m, file=sys.stderr), release=LAB_RELEASE)
    lab = LabHandle(TEST_LAB, info)
    lab.wait_for_line("sglang-demo", "ready to roll")
    try:
        yield lab
    finally:
        handle.down()
