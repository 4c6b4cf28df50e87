"""The source pane against the lab: one-sentence errors of the source cache over SSH (a missing file,
a file we may not read, a package upgraded since the process started), and the real source of a
failing frame opened from the journal."""

from __future__ import annotations

import asyncio
import time

import pytest

from cockpit.config import Config, HostConfig
from cockpit.remote.source import PACKAGE_DIRS, SourceCache, SourceError, staleness
from cockpit.remote.ssh import SSHHost
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.source import SourcePane, SourceView
from tests.conftest import LAB_SITE, LabHandle

LAB_HOOK = f"{LAB_SITE}/sglang/srt/arg_groups/speculative_hook.py"  # the same file in the lab of this run
EAGLE = (
    "ExecStart=/opt/sglang/venv/bin/python -m cockpit.lab.standin --model-path /models/Llama-3.1-8B-Instruct "
    "--tp-size 8 --speculative-algorithm EAGLE3 --speculative-draft-model-path /models/EAGLE3-LLaMA3.1-Instruct-8B "
    "--speculative-eagle-topk 4 --speculative-num-draft-tokens 3"
)


async def test_source_errors_are_one_sentence(lab: LabHandle) -> None:
    root = SSHHost(HostConfig(name=lab.name))
    operator = SSHHost(HostConfig(name=f"{lab.name}-operator", user="operator"))
    cache = SourceCache()
    try:
        with pytest.raises(SourceError, match=f"^/opt/nope.py does not exist on {lab.name}$"):
            await cache.get(root, "/opt/nope.py", roots=None)
        lab.ssh("sh", "-c", "mkdir -p /root/private && echo 'x = 1' > /root/private/mod.py && chmod 700 /root/private")
        with pytest.raises(
            SourceError, match=f"^permission denied reading /root/private/mod.py on {lab.name}-operator$"
        ):
            await cache.get(operator, "/root/private/mod.py", roots=None)
        with pytest.raises(SourceError, match="is not a file"):
            await cache.get(root, "<frozen runpy>", roots=PACKAGE_DIRS)
        module = "/opt/upgrade-test/site-packages/sglang/srt/mod.py"
        lab.ssh("sh", "-c", f"mkdir -p $(dirname {module}) && echo 'x = 1' > {module} && touch -d '-1 hour' {module}")
        started = time.time() - 60  # the process started a minute ago, after the file was written
        source = await cache.get(root, module, roots=PACKAGE_DIRS)
        assert staleness(source, started) is None  # older than the process
        assert source is await cache.get(root, module, roots=PACKAGE_DIRS)  # cached: same mtime, no second read
        lab.ssh("sh", "-c", f"echo 'x = 2' > {module}")  # the package is upgraded after the process started
        newer = await cache.get(root, module, roots=PACKAGE_DIRS)
        assert newer is not source and newer.text == "x = 2\n"
        warning = staleness(newer, started)
        assert (
            warning is not None
            and "changed at" in warning
            and "the lines shown may not be the lines that ran" in warning
        )
    finally:
        await root.close()
        await operator.close()


async def test_enter_on_the_failing_frame_shows_the_real_source_in_the_lab(lab: LabHandle) -> None:
    dropin = "/etc/systemd/system/sglang-demo.service.d/eagle.conf"
    lab.ssh("mkdir", "-p", "/etc/systemd/system/sglang-demo.service.d")
    lab.ssh("tee", dropin, input=f"[Service]\nRestart=no\nExecStart=\n{EAGLE}\n")
    lab.ssh("systemctl", "daemon-reload")
    lab.ssh("systemctl", "restart", "sglang-demo")
    try:
        app = CockpitApp(Config(), Target(lab.name, "sglang-demo.service"))
        async with app.run_test(size=(140, 44)) as pilot:
            view = app.query_one(JournalView)
            deadline = time.monotonic() + 30
            while not any(tb.exception == "AssertionError" and tb.complete for _, tb in view.model.tracebacks()):
                assert time.monotonic() < deadline, "the AssertionError never reached the pane"
                await asyncio.sleep(0.2)
            view.focus()
            await pilot.press("G", "left_square_bracket", "enter")  # to the traceback, unfold it
            assert view.model.text(view.cursor).lstrip().startswith(f'File "{LAB_HOOK}", line 1162')
            await pilot.press("enter")  # open the failing frame
            pane = app.query_one(SourcePane)
            source = pane.query_one(SourceView)
            deadline = time.monotonic() + 10
            while source.shown is None or source.shown.path != LAB_HOOK:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            assert source.shown.line == 1162 and (source.shown.start, source.shown.end) == (1160, 1163)
            assert source.lines[1161].strip() == "and cfg.speculative_num_draft_tokens is None"
            assert source.cursor == 1161
            explanation = str(pane.query_one("#explanation").render())
            assert (
                "This check failed: `not speculative_adaptive and speculative_num_steps is None` requires "
                "`speculative_eagle_topk is None and speculative_num_draft_tokens is None`" in explanation
            )
            assert "--speculative-num-draft-tokens" in explanation
            await pilot.press("u")  # up the stack: the caller's file
            deadline = time.monotonic() + 10
            while source.shown.path == LAB_HOOK:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            assert source.shown.path.endswith("sglang/srt/speculative/spec_info.py") and source.shown.line == 264
    finally:
        lab.ssh("rm", "-f", dropin)
        lab.ssh("systemctl", "daemon-reload")
        lab.ssh("systemctl", "reset-failed", "sglang-demo", check=False)
        lab.ssh("systemctl", "restart", "sglang-demo")
