"""Every test under tests/lab needs the lab (root, systemd-nspawn): marked so by where it lives."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LAB_RELEASE, TEST_LAB, LabHandle

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def node1(lab: LabHandle) -> Iterator[LabHandle]:
    """A second lab, routed to the test lab: node 1 of a launch whose node 0 is the test lab."""
    from cockpit.lab.lab import Lab

    handle = Lab(f"{TEST_LAB}-n1")
    info = handle.up(progress=lambda m: print(m, file=sys.stderr), release=LAB_RELEASE)
    try:
        yield LabHandle(handle.name, info)
    finally:
        handle.down()


@pytest.fixture(scope="session")
def real_lab() -> Iterator[LabHandle]:
    """The real-SGLang lab, booted once for every module that needs it: its units' starts are
    what each test pays for (half a minute and more each), so none pays for a boot of its own."""
    from cockpit.lab.lab import Lab

    name = f"{TEST_LAB}-r"
    handle = Lab(name)
    info = handle.up(progress=lambda m: print(m, file=sys.stderr), real_sglang=True)
    lab = LabHandle(name, info)
    try:
        journal = lambda: lab.ssh("journalctl", "-u", "sglang-demo", "-o", "cat", check=False).stdout  # noqa: E731
        try:
            # About 12 s here (8 s of it SGLang's argument resolution, compiled); a CI machine took
            # more than 90 s once, when the image was not compiled.
            lab.wait_for(lambda: "ready to roll" in journal(), timeout=300, what="the stand-in's ready line")
        except AssertionError as timed_out:
            state = lab.ssh("systemctl", "show", "-p", "ActiveState,SubState,NRestarts", "sglang-demo", check=False)
            tail = "\n".join(journal().splitlines()[-30:])
            unit = state.stdout.split()
            raise AssertionError(f"{timed_out}; the demo unit: {unit}; its journal ends:\n{tail}") from None
        yield lab
    finally:
        handle.down()


# The lab tests whose subject is what differs between Debian's releases, run on each release
# the lab boots (`make test`'s second pass, on trixie: systemd 257, OpenSSH 10, Python 3.13 on
# the host): the journal followed, paged and lost by journald; systemd's units, edits, reloads,
# stops and cgroups; sshd's logins, keys, limits and faults; the host's /proc and sudo. The
# others test the cockpit's own logic over a host (experiments, rollouts, the fleet, the fold,
# the pre-flight, the stand-in's conformance) and run on bookworm alone, where the real SGLang
# lab runs too: both passes of all of them took 91 minutes, past CI's 90.
EVERY_RELEASE = (
    "faults/test_early_ssh_faults.py",
    "faults/test_key_faults.py",
    "faults/test_network_faults.py",
    "faults/test_write_faults.py",
    "test_gpu_hygiene_lab.py",
    "test_group_write_lab.py",
    "test_hostile_journalctl_lab.py",
    "test_journal_opens_at_the_tail.py",
    "test_journal_pane_lab.py",
    "test_journald_losses_lab.py",
    "test_lab.py",
    "test_mux_lab.py",
    "test_remote_lab.py",
    "test_session_lab.py",
    "test_survivors_lab.py",
    "test_unit_file_lab.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    every_release = {HERE / name for name in EVERY_RELEASE}
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.lab)
            if item.path in every_release:
                item.add_marker(pytest.mark.every_release)
