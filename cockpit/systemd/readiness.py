"""Is the server up, and what does it say of itself? Asked on the host itself, through the SSH
connection: servers listen on loopback.

SGLang answers 503 at once while it starts. Once up, `/health_generate` generates one token
through the scheduler and the detokenizer: it sleeps 1 s, then looks once a second for any
output for up to 20 s; 200, else 503 and its `Health check failed` line. From 0.5.2 `/health`
is the same handler, so it costs the same: at least 1.0 s, a `Prefill batch` line and an access
line in the journal per call (tests/data/sglang-0.5.23/real-tp1-health.jsonl), and it tells a
hung server as well. Only where the release has `SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION`
(0.5.9 and later, on by default) and the unit's environment turns it off does `/health` answer
200 at once, asking the model nothing (0.4.x's `/health` was a handler of its own that did the
same). Which it is for a unit is read from the release's own source and the unit
(cockpit.sglang.catalog.generation); a probe says it with its answer and how long that took, and a
generating endpoint is asked sparingly once the server is ready.

A port answers for whoever listens on it: SGLang's default 30000 is every server's that gives
no --port, so a unit running `sleep` read ready on another unit's server. So an endpoint is
asked only where the unit's own cgroup listens (`own_probe`: the host's listeners read first);
where another process listens the probe says whose it is instead, and where whose it is cannot
be read (no `ss`, a listener this login may not see without `ss --cgroup`) an answer says so.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from cockpit.remote.base import Host, HostError
from cockpit.systemd import listeners
from cockpit.systemd.listeners import PortHolder

HEALTH, GENERATE = "/health", "/health_generate"
# A generating endpoint is asked at most this often once the server has answered 200: each ask
# is a token, a second and journal lines (the app's status poll and the fleet keep to it).
RECHECK_S = 15.0
# A generating endpoint that has not answered within this is `hung`, in every view (the app, the
# fleet, cockpit status, a restart's watch). A healthy server answers /health_generate in 1 to 2 s
# (it looks for output once a second); a hung one after 20 s, with 503.
HUNG_AFTER_S = 10.0


@dataclass(frozen=True)
class Probe:
    """What one health endpoint said: its HTTP status, or None with why there was none; how long
    it took, and whether asking it made the server generate a token."""

    path: str
    status: int | None
    # Why there was no status ("no answer within 10 s", "not asked: PID 62 (python) of
    # x.service listens on 127.0.0.1:30000, not y.service"); with one, what is not known of it.
    detail: str = ""
    seconds: float | None = None  # from asking to the answer, as the cockpit saw it (None: no answer, or not timed)
    generates: bool | None = None  # whether the endpoint generates a token (None: not known)
    # Why it does or does not, as the release's source and the unit say it
    # ("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is on, SGLang 0.5.23's default").
    generation: str = ""
    # When it was asked (the epoch, by the clock of whoever asked; None: not known): a hang is
    # dated by what the server logged since, not by its last line (an idle server logs nothing)
    asked_at: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200

    @property
    def timed_out(self) -> bool:
        return self.status is None and self.detail.startswith("no answer")

    def words(self) -> str:
        """`/health answered 200 in 1.01 s (generates a token: SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION
        is on, SGLang 0.5.23's default)`, `/health_generate: no answer within 10 s`."""
        if self.status is None:
            return f"{self.path}: {self.detail}"
        took = f" in {self.seconds:.2f} s" if self.seconds is not None else ""
        notes = "; ".join(n for n in (self.cost(), self.detail) if n)
        return f"{self.path} answered {self.status}{took}" + (f" ({notes})" if notes else "")

    def cost(self) -> str:
        """`generates a token: WHY`, `asks the model nothing: WHY`, or "" where not known."""
        if self.generates is None:
            return ""
        said = "generates a token" if self.generates else "asks the model nothing"
        return f"{said}: {self.generation}" if self.generation else said


@dataclass(frozen=True)
class LastAnswer:
    """A unit's last health answer, kept by a caller that polls (the fleet's rounds, the app's
    deployment watch): for which start, at which address, and when (monotonic)."""

    invocation: str | None
    address: tuple[str, int]
    answer: Probe
    at: float

    def due(self, now: float) -> bool:
        """Whether to ask again: at each poll while it starts (refused, or 503 at once: nothing
        generated) or where the endpoint is known to generate nothing; at most once per
        RECHECK_S after a 200 or no answer in time from one that generates or may."""
        settled = self.answer.ok or self.answer.timed_out
        return not settled or self.answer.generates is False or now - self.at >= RECHECK_S

    def aged(self, now: float) -> Probe:
        """The answer, saying how old it is and why it was not asked again."""
        why = "" if self.answer.generates else f"{self.answer.path} may generate a token, so "  # else said already
        age = f"asked {now - self.at:.0f} s ago: {why}at most every {RECHECK_S:g} s"
        return replace(self.answer, detail="; ".join(d for d in (self.answer.detail, age) if d))


async def probe(host: Host, addr: str, port: int, path: str = HEALTH, timeout: float = 5.0) -> Probe:
    """`path` asked once, and timed; a server too old for `/health_generate` (404) is asked
    `/health`. `/health_generate` generates a token by its name; whether `/health` does is for
    the caller to say (it needs the release and the unit)."""
    began, asked_at = time.monotonic(), time.time()
    try:
        status, _ = await host.http_request("GET", addr, port, path, timeout=timeout)
    except asyncio.TimeoutError:
        return Probe(path, None, f"no answer within {timeout:g} s", asked_at=asked_at)
    except (OSError, ConnectionError, HostError) as e:
        said = f"nothing answers on {addr}:{port} ({e})" if str(e) else f"nothing answers on {addr}:{port}"
        return Probe(path, None, said, asked_at=asked_at)
    if status == 404 and path == GENERATE:
        return await probe(host, addr, port, HEALTH, timeout)
    seconds = time.monotonic() - began
    return Probe(path, status, seconds=seconds, generates=True if path == GENERATE else None, asked_at=asked_at)


@dataclass(frozen=True)
class PortCheck:
    """Whether a unit's endpoint is to be asked, by who listens on its port; `note` says why not,
    or, where it is asked, what is not known of whose the answer is."""

    ask: bool
    note: str = ""

    def noted(self, answer: Probe) -> Probe:
        """The answer, with what is not known of it."""
        return replace(answer, detail="; ".join(d for d in (answer.detail, self.note) if d)) if self.note else answer

    def said(self, answer: Probe | None, path: str = HEALTH) -> Probe | None:
        """What the endpoint said for the unit (None: not asked yet), or why it is not the
        unit's to give."""
        if not self.ask:
            return Probe(path, None, self.note)
        return self.noted(answer) if answer is not None else None


def port_check(holders: Sequence[PortHolder] | None, unit: str, addr: str, port: int) -> PortCheck:
    """Is `unit`'s own cgroup what listens on addr:port? `holders`: the host's listeners (None
    where it has no `ss`)."""
    unknown = f"whose listener on {addr}:{port} answered could not be read"
    if holders is None:
        return PortCheck(True, f"{unknown}: the host has no ss")
    there = [h for h in holders if h.port == port and h.takes(addr)]
    if not there:
        return PortCheck(False, f"nothing listens on {addr}:{port}")
    if any(h.unit == unit for h in there):
        return PortCheck(True)
    if any(h.cgroup is None for h in there):
        return PortCheck(True, unknown)
    return PortCheck(False, f"{there[0].who()} listens on {addr}:{port}, not {unit}")


async def owner_check(host: Host, unit: str, addr: str, port: int) -> PortCheck:
    """Who listens on addr:port, read now (`ss`: about 23 ms of the host's CPU, ten times the
    probe itself, so a poll keeps a start's answer while that start answers)."""
    try:
        return port_check(await listeners.listening(host), unit, addr, port)
    except HostError as e:
        return PortCheck(True, f"whose listener on {addr}:{port} answered could not be read ({e})")


async def own_probe(host: Host, unit: str, addr: str, port: int, path: str = HEALTH, timeout: float = 5.0) -> Probe:
    """`probe`, asked only where `unit`'s own cgroup listens (port_check, on the listeners read
    now); otherwise a Probe without a status that says who listens there."""
    check = await owner_check(host, unit, addr, port)
    if check.ask:
        return check.noted(await probe(host, addr, port, path, timeout))
    return Probe(path, None, check.note)


async def is_ready(host: Host, addr: str, port: int) -> bool:
    """Whether the server generates a token: what every view calls ready."""
    return (await probe(host, addr, port, GENERATE, HUNG_AFTER_S)).ok


async def server_info(host: Host, addr: str, port: int, timeout: float = 5.0) -> dict[str, Any] | None:
    """`/server_info` (the resolved arguments, the version), or None when the server cannot
    say. Older releases serve it only at `/get_server_info`, asked after a 404."""
    try:
        for path in ("/server_info", "/get_server_info"):
            status, body = await host.http_request("GET", addr, port, path, timeout=timeout)
            if status != 404:
                break
    except (OSError, asyncio.TimeoutError, HostError):
        return None
    if status != 200:
        return None
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
