"""Every worker's failure reaches the screen in one sentence (cockpit.ui.failures): a worker runs
with `exit_on_error=False`, and Textual tells only the node that ran it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import cockpit.ui
from cockpit.config import Config
from cockpit.session import RecordedSession
from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.preflight.preflight import Finding
from cockpit.systemd.unit import Unit, load_unit
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.flags import FlagsPane
from cockpit.ui.screens.write import WriteModal
from tests.conftest import until
from tests.lab.test_rollout_lab import SEED, UNIT


class DeepModelConfig(RecordedSession):
    """The write modal's host check meeting a model config.json nested 100,000 deep, as it did
    before the model files read such a file as no config: what any check that raises would do."""

    async def host_findings(self, edited: Unit) -> list[Finding]:
        json.loads("[" * 100_000 + "]" * 100_000)
        return []


async def test_a_write_whose_host_check_raised_says_so_instead_of_nothing(sglang_root) -> None:
    catalog = load_catalog(sglang_root("0.5.23"))
    target = Target("cockpit-lab", "sglang-demo.service")
    session = DeepModelConfig(Config(), target)
    app = CockpitApp(Config(), target, session=session)
    session.use_unit(load_unit({UNIT: SEED}, UNIT, name=target.unit, catalog=catalog), catalog)
    async with app.run_test(size=(150, 50), notifications=True) as pilot:
        await pilot.press("e")
        pane = app.query_one(FlagsPane)
        pane.edited = pane.edited.set_flag("--speculative-num-steps", "3")
        await pilot.press("w")
        said = "open write stopped on an unexpected error: RecursionError: maximum recursion depth exceeded"
        await until(lambda: any(n.message.startswith(said) for n in app._notifications), 10, list(app._notifications))
        assert not isinstance(app.screen, WriteModal) and app.is_running


def _runs_workers(cls: ast.ClassDef) -> bool:
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run_worker":
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                called = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(called, ast.Name) and called.id == "work":
                    return True
    return False


def _says_failures(cls: ast.ClassDef) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["on_worker_state_changed"]
        and isinstance(node.value, ast.Name)
        and node.value.id == "said_failure"
        for node in cls.body
    )


@pytest.mark.parametrize("path", sorted(Path(cockpit.ui.__file__).parent.rglob("*.py")), ids=lambda p: p.name)
def test_every_class_that_runs_workers_says_their_failures(path: Path) -> None:
    classes = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]
    silent = [c.name for c in classes if _runs_workers(c) and not _says_failures(c)]
    assert silent == [], f"{path.name}: {silent} run workers without on_worker_state_changed = said_failure"
