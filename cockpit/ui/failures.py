"""A worker that ended in error, said on the screen in one sentence.

Long calls run in workers with `exit_on_error=False`, so a failure ends the worker, never the
app (docs/facts.md). Textual then only logs it and posts the state change to the node that ran
the worker (the message does not bubble): an error that worker's own code did not catch ended it
without a word (`w` on a host whose config.json was nested 100,000 deep did nothing at all). So
each class that runs workers takes `said_failure` as its `on_worker_state_changed`, one handler
for every worker instead of a try/except in each.
"""

from __future__ import annotations

from typing import Any

from textual.dom import DOMNode
from textual.worker import Worker, WorkerState

from cockpit.errors import CockpitError


def failure_sentence(worker: Worker[Any]) -> str:
    """`stacks failed: ...` for an error the cockpit words itself, else the error's type and its
    first line (`open write stopped on an unexpected error: RecursionError: maximum ...`)."""
    what = worker.name.removeprefix("action_").removesuffix("_worker").replace("_", " ") or "a background task"
    error = worker.error
    if isinstance(error, CockpitError):
        return f"{what} failed: {error}"
    said = str(error).strip().split("\n", 1)[0]
    return f"{what} stopped on an unexpected error: {type(error).__name__}" + (f": {said}" if said else "")


def said_failure(node: DOMNode, event: Worker.StateChanged) -> None:
    """`on_worker_state_changed` of every class that runs workers."""
    if event.state == WorkerState.ERROR:
        node.app.notify(failure_sentence(event.worker), severity="error", timeout=15)
