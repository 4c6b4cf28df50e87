"""Every test under tests/lab needs the lab (root, systemd-nspawn): marked so by where it lives."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import TEST_LAB, LabHandle

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def node1(lab: LabHandle) -> Iterator[LabHandle]:
    """A second lab, routed to the test lab: node 1 of a launch whose node 0 is the test lab."""
    from cockpit.lab.lab import Lab

    handle = Lab(f"{TEST_LAB}-n1")
    info = handle.up(progress=lambda m: print(m, file=sys.stderr))
    try:
        yield LabHandle(handle.name, info)
    finally:
        handle.down()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.lab)
