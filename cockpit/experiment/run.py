"""An experiment run: each variant checked, written, restarted, watched to ready and measured in
turn, and the unit put back at the end, whatever happened between.

Every variant is the unit as the experiment first found it plus its own changes. One that the
pre-flight (static rules, SGLang's own dry run where the host can run it, the host's GPUs and
ports) says would not start is skipped with that reason and never written; one that crashes on
start or under load is an outcome, its traceback folded into the record, and the next variant
runs. The record is saved on the jump box after every step (cockpit.experiment.store): a run
cut off goes on with `resume`, and the original text it restores is the one saved at the
first start, never the unit as a cut-off run left it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cockpit.errors import CockpitError, UsageError
from cockpit.experiment import store
from cockpit.experiment.answer import answer, judge
from cockpit.experiment.plan import RESTORE, Plan, Variant

if TYPE_CHECKING:
    from cockpit.attempts import Attempt
    from cockpit.load.gpu import GpuNotice, GpuSample
    from cockpit.load.results import RequestResult
    from cockpit.remote.base import Host
    from cockpit.sglang.deployments.deployment import Deployment
    from cockpit.sglang.preflight.preflight import Finding
    from cockpit.systemd.group_write import NodeWrite
    from cockpit.systemd.unit import Unit
    from cockpit.targets import Target


class Driver(Protocol):
    """What an experiment asks of a session (cockpit.session.Session is one): the unit read,
    checked, written and restarted the way the app's own edits are."""

    target: Target | None
    deployment: Deployment | None

    @property
    def host(self) -> Host: ...
    @property
    def unit(self) -> Unit | None: ...
    @property
    def address(self) -> tuple[str, int] | None: ...
    async def reload(self) -> Deployment | None: ...
    async def write_findings(self, edited: Unit) -> list[Finding]: ...
    async def host_findings(self, edited: Unit) -> list[Finding]: ...
    async def apply(self, loaded: Unit, edited: Unit, note: str = "") -> Attempt: ...
    async def restart(self) -> Attempt: ...
    async def act(self, action: str) -> Attempt | None: ...

    # A deployment (a launch over nodes) opened: its nodes are written and restarted as one.
    group: str | None

    async def group_writes(self, loaded: Unit, edited: Unit) -> tuple[list[NodeWrite], list[Finding]]: ...
    async def group_writes_to(self, texts: dict[str, dict[str, str]]) -> list[NodeWrite]: ...
    async def apply_group(self, writes: list[NodeWrite]) -> Attempt: ...
    async def restart_group(self, note: str = "", flags: tuple[dict, dict] = ({}, {})) -> Attempt: ...


# A variant's outcome once it is final: a resumed run does not run it again.
SKIPPED, CRASHED, CRASHED_UNDER_LOAD, MEASURED, NOT_MEASURED, FAILED = (
    "skipped",
    "crashed on start",
    "crashed under load",
    "measured",
    "not measured",  # ready, but the load could not reach it (the forward, the server's answers)
    "failed",  # the write or the restart failed: the host refused it
)
FINAL = (SKIPPED, CRASHED, CRASHED_UNDER_LOAD, MEASURED, NOT_MEASURED, FAILED)
METRICS_TIMEOUT_S = 10.0


class ExperimentRun:
    """One run of a plan through a session (the app's, or the headless command's)."""

    def __init__(
        self,
        session: Driver,
        plan: Plan,
        *,
        say: Callable[[str], None] = lambda _: None,
        resume: bool = False,
        root: Path | None = None,
    ) -> None:
        target = session.target
        if target is None:
            raise UsageError("an experiment runs on one unit: give --host and --unit, or name them in its file")
        self.session = session
        self.plan = plan
        self._said = say
        self.resume = resume
        self.path = store.record_path(target.host, target.unit, plan.name, root)
        self.record: dict[str, Any] = {}
        self.lines: list[str] = []  # what it said, in order: the app's screen shows the last of them
        # Cancelled by the operator (B, Ctrl-C): put the unit back. Cut off by the app closing: leave
        # the unit and the record as they are, for --resume (the connection is going too).
        self.restore_on_cancel = True
        self.task: asyncio.Task[Any] | None = None  # where a session runs it as its task

    def say(self, line: str) -> None:
        self.lines.append(line)
        self._said(line)

    async def run(self) -> dict[str, Any]:
        """The whole experiment; the record (also on disk). Cancelled, it restores the unit first."""
        session = self.session
        session.host.refuse_changes("no experiment was run")
        found = await session.reload()
        if found is None or found.unit is None:
            problems = found.problems if found is not None else []
            raise CockpitError(problems[0] if problems else "the unit could not be read")
        self.record = self._begin(found.unit, found.status.active_state)
        if session.group is not None and "original_nodes" not in self.record:
            writes = await session.group_writes_to({})  # every node as read now: the way back
            self.record["original_nodes"] = {w.node: _texts(w.loaded) for w in writes}
            self._save()
        original = _with_texts(found.unit, self.record["original"])
        try:
            for variant in self.plan.variants:
                entry = self._entry(variant)
                if entry.get("outcome") in FINAL:
                    continue
                await self._variant(variant, entry, original)
                if entry["outcome"] == FAILED:
                    break  # the host refused a write: the next would meet the same
        except asyncio.CancelledError:
            if not self.restore_on_cancel:
                self.record["cut_off_at"] = time.time()
                self._save()
                raise
            self.record["cancelled"] = True
            self._save()
            await asyncio.shield(self._end(original))
            raise
        except Exception as e:  # noqa: BLE001 - whatever stopped it, the unit goes back if it can
            self.record["stopped_by"] = f"{type(e).__name__}: {e}"
            self.say(f"the experiment stopped: {e}")
            try:
                await self._end(original)
            except Exception as again:  # noqa: BLE001 - said, and the record is kept for --resume
                self.say(f"the unit could not be put back ({again}): --resume goes on and puts it back")
            raise
        await self._end(original)
        return self.record

    # -- the record -------------------------------------------------------------------------

    def _begin(self, unit: Unit, active_state: str) -> dict[str, Any]:
        saved = store.load(self.path)
        if saved is not None and saved.get("state") != store.FINISHED:
            if not self.resume:
                raise CockpitError(
                    f"an unfinished run of experiment {self.plan.name!r} is recorded in {self.path} (the unit may be "
                    f"on one of its variants): give --resume to go on with it and put the unit back at its end"
                )
            self.say(f"resuming {self.plan.name}: the unit as it was before is the one recorded in {self.path}")
            saved["plan"] = self.plan.to_json()
            return saved
        target = self.session.target
        assert target is not None
        found = self.session.deployment
        return {
            "experiment": self.plan.name,
            "file": self.plan.path,
            "plan": self.plan.to_json(),
            "host": target.host,
            "unit": target.unit,
            "state": "running",
            "started_at": time.time(),
            "release": found.catalog.version if found is not None and found.catalog is not None else None,
            "original": _texts(unit),
            "was_active": active_state,
            "variants": [],
        }

    def _entry(self, variant: Variant) -> dict[str, Any]:
        for entry in self.record["variants"]:
            if entry["name"] == variant.name:
                if entry.get("outcome") not in FINAL:  # cut off mid-way: measured again from its start
                    entry.update(levels=[], outcome="pending")
                return entry
        entry = {"name": variant.name, "changes": variant.words(), "outcome": "pending", "levels": []}
        self.record["variants"].append(entry)
        return entry

    def _save(self) -> None:
        try:
            store.save(self.path, self.record)
        except OSError as e:  # the run goes on: its record is also what `run` returns
            self.say(f"the experiment's record could not be saved in {self.path}: {e}")

    # -- one variant ------------------------------------------------------------------------

    async def _variant(self, variant: Variant, entry: dict[str, Any], original: Unit) -> None:
        from cockpit.sglang.preflight.preflight import ERROR, settled

        session = self.session
        await session.reload()  # the unit and its running start as they are now, for the checks
        try:
            edited = variant.applied(original)
        except CockpitError as e:
            entry.update(outcome=SKIPPED, reason=f"the unit cannot take this change: {e}")
            self.say(f"{variant.name}: skipped: {entry['reason']}")
            self._save()
            return
        current = session.unit
        assert current is not None
        edited = _with_texts(current, {f.path: f.render() for f in edited.files})
        self.say(f"{variant.name}: checking ({variant.words()})")
        writes: list[NodeWrite] = []
        if session.group is not None:  # node 0's edit carried to every node, checked across them
            try:
                writes, findings = await session.group_writes(current, edited)
            except CockpitError as e:
                entry.update(outcome=SKIPPED, reason=f"the nodes cannot take this change: {e}")
                self.say(f"{variant.name}: skipped: {entry['reason']}")
                self._save()
                return
        else:
            findings = settled([*await session.write_findings(edited), *await session.host_findings(edited)])
        entry["findings"] = [f.to_json() for f in findings]
        entry["unit_text"] = {f.path: f.render() for f in edited.files}
        errors = [f for f in findings if f.severity == ERROR]
        if errors:
            raised = f" ({errors[0].would_raise})" if errors[0].would_raise else ""
            entry.update(outcome=SKIPPED, reason=f"{errors[0].rule}{raised}: {errors[0].message}")
            self.say(f"{variant.name}: skipped, it would not start: {entry['reason']}")
            self._save()
            return
        entry["outcome"] = "starting"
        self._save()
        note = f"experiment {self.plan.name}: {variant.name}"
        self.say(f"{variant.name}: writing and restarting")
        attempt = await self._write_and_restart(current, edited, writes, note)
        entry.update(attempt=attempt.number, start_s=attempt.seconds, detail=attempt.detail)
        if attempt.outcome != "ready":
            failed = attempt.outcome == "failed"
            entry.update(outcome=FAILED if failed else CRASHED, reason=attempt.detail, traceback=attempt.traceback)
            self.say(f"{variant.name}: {entry['outcome']}: {attempt.detail}")
            self._save()
            return
        try:
            await self._measure(variant, entry)
        except (CockpitError, OSError) as e:
            entry.update(outcome=NOT_MEASURED, reason=str(e) or type(e).__name__)
            self.say(f"{variant.name}: not measured: {entry['reason']}")
        self._save()

    async def _write_and_restart(self, current: Unit, edited: Unit, writes: list[NodeWrite], note: str) -> Attempt:
        """The write contract and a restart watched to ready: of the unit, or of every node of
        an opened deployment (all written or none, then the group restarted as one). A variant
        that changes nothing restarts, so every variant starts from a fresh server."""
        session = self.session
        if session.group is None:
            return await session.apply(current, edited, note) if edited.changed() else await session.restart()
        if any(w.new for w in writes):
            return await session.apply_group(writes)
        return await session.restart_group(note)

    async def _measure(self, variant: Variant, entry: dict[str, Any]) -> None:
        from cockpit.load.runner import forwarded
        from cockpit.systemd.readiness import server_info
        from cockpit.systemd.status import fetch

        session = self.session
        target, address = session.target, session.address
        assert target is not None
        if address is None:
            entry.update(outcome=FAILED, reason=f"cannot tell where {target.unit} listens: the unit could not be read")
            return
        running = (await fetch(session.host, target.unit)).running_invocation
        info = await server_info(session.host, *address) or {}
        entry["server_version"] = info.get("version")
        entry["outcome"] = "measuring"
        work = self.plan.workload
        loads: list[tuple[int, float | None]] = [(c, None) for c in work.concurrency] + [(0, r) for r in work.rates]
        async with forwarded(session.host, *address) as local:
            url = f"http://127.0.0.1:{local}"
            for repeat in range(work.repeats):
                for concurrency, rate in loads:
                    level = await self._level(url, concurrency, rate, repeat)
                    entry["levels"].append(level)
                    self.say(f"{variant.name}: {level['load']}: {_level_words(level)}")
                    self._save()
                    now = (await fetch(session.host, target.unit)).running_invocation
                    if now != running:
                        entry.update(outcome=CRASHED_UNDER_LOAD, reason=f"the start ended during {level['load']}")
                        entry["traceback"] = await self._crash_of(running)
                        self.say(f"{variant.name}: crashed under load at {level['load']}")
                        return
        entry["outcome"] = MEASURED

    async def _level(self, url: str, concurrency: int, rate: float | None, repeat: int) -> dict[str, Any]:
        from cockpit.load.runner import LoadConfig, Runner

        work = self.plan.workload
        config = LoadConfig(
            url=url,
            concurrency=(concurrency,) if rate is None else (),
            rates=(rate,) if rate is not None else (),
            requests=work.requests,
            duration_s=work.duration_s,
            warmup=work.warmup,
            input_len=work.input_len[0],
            input_len_max=work.input_len[1],
            output_len=work.output_len[0],
            output_len_max=work.output_len[1],
            endpoint=work.endpoint,
        )
        results: list[RequestResult] = []
        before = await _counters(url)
        async with self._gpus() as gpus:
            [level] = await Runner(config, on_request=lambda _c, r: results.append(r)).run()
        after = await _counters(url)
        server = {k: after[k] - before.get(k, 0.0) for k in after if k.endswith("_total")} if after else None
        if server is not None and "spec_accept_length" in after:
            server["spec_accept_length"] = after["spec_accept_length"]
        return {
            "load": level.load,
            "repeat": repeat,
            "seed": config.seed,
            "level": level.to_json(),
            **judge(level, results, self.plan.slo),
            "server": server,  # None: the unit runs without --enable-metrics
            "gpus": gpus,
        }

    @contextlib.asynccontextmanager
    async def _gpus(self) -> AsyncIterator[dict[str, Any]]:
        """The host's GPUs while a level runs: each one's mean utilisation and most memory used,
        or why there is no figure (the dict is filled when the level ends)."""
        from cockpit.load.gpu import GpuSampler

        seen: list[GpuSample] = []
        notices: list[str] = []

        def noticed(notice: GpuNotice) -> None:
            notices.append(notice.message)

        said: dict[str, Any] = {}
        task = asyncio.create_task(GpuSampler(self.session.host, interval_ms=1000).run(seen.extend, noticed))
        try:
            yield said
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            said.update(_gpu_summary(seen, notices))

    async def _crash_of(self, invocation: str | None) -> dict[str, Any] | None:
        """The folded traceback of the start that ended, from its own journal lines."""
        from cockpit.systemd.journal import journal_argv, query
        from cockpit.traceback.fold import fold_entries, last_with_frames

        target = self.session.target
        if invocation is None or target is None:
            return None
        try:
            entries = await query(self.session.host, journal_argv(target.unit, f"_SYSTEMD_INVOCATION_ID={invocation}"))
        except CockpitError:
            return None
        tb = last_with_frames(fold_entries(entries))
        return tb.to_json() if tb is not None else None

    # -- the end ----------------------------------------------------------------------------

    async def _end(self, original: Unit) -> None:
        """The unit back as it was found (or on the variant the plan names), the answer, saved."""
        session = self.session
        keep = None if self.plan.end == RESTORE else self.plan.end
        kept = next((e for e in self.record["variants"] if e["name"] == keep and e.get("outcome") == MEASURED), None)
        if keep is not None and kept is None:
            self.say(f"{keep} was not measured: the unit is put back as it was instead")
        await session.reload()
        current = session.unit
        end: dict[str, Any] = {"left_on": kept["name"] if kept else "original"}
        nodes = self.record.get("original_nodes")
        if session.group is not None and nodes is not None:
            if kept is not None:
                self.say(f"a deployment is put back as it was: leaving it on {keep} is for one unit")
                end["left_on"] = "original"
            await self._end_group(nodes, end)
        elif current is not None:
            texts = kept["unit_text"] if kept else self.record["original"]
            back = _with_texts(current, texts)
            if back.changed():
                self.say("putting the unit back as it was" if kept is None else f"leaving the unit on {keep}")
                attempt = await session.apply(current, back, f"experiment {self.plan.name}: end")
                end.update(attempt=attempt.number, outcome=attempt.outcome, detail=attempt.detail)
            if kept is None and self.record.get("was_active") in ("inactive", "failed"):
                await session.act("stop")  # it was not running before the experiment
                end["stopped"] = True
            end["unit_as_asked"] = await self._texts_on_host() == texts
        self.record["end"] = end
        self.record["answer"] = answer(
            [v for v in self.record["variants"] if v.get("outcome") == MEASURED], self.plan.base
        )
        self.record.update(state=store.FINISHED, finished_at=time.time())
        self._save()

    async def _end_group(self, nodes: dict[str, dict[str, str]], end: dict[str, Any]) -> None:
        """Every node's files back as recorded, the group restarted on them; read back."""
        session = self.session
        writes = await session.group_writes_to(nodes)
        if any(w.new for w in writes):
            self.say("putting every node back as it was")
            attempt = await session.apply_group(writes)
            end.update(attempt=attempt.number, outcome=attempt.outcome, detail=attempt.detail)
        again = await session.group_writes_to({})
        end["unit_as_asked"] = {w.node: _texts(w.loaded) for w in again} == nodes

    async def _texts_on_host(self) -> dict[str, str]:
        """The unit's files as the host has them now, read again (the check that it is back)."""
        await self.session.reload()
        unit = self.session.unit
        return _texts(unit) if unit is not None else {}


def _texts(unit: Unit) -> dict[str, str]:
    """The unit's files' texts as read."""
    return {f.path: unit.texts[f.path] for f in unit.files if f.path in unit.texts}


def _with_texts(unit: Unit, texts: dict[str, str]) -> Unit:
    from cockpit.rollout.single import with_files

    return with_files(unit, {p: t for p, t in texts.items() if any(f.path == p for f in unit.files)})


async def _counters(url: str) -> dict[str, float]:
    """The server's own counters (cockpit.sglang.server.metrics.counters); empty without /metrics."""
    import aiohttp

    from cockpit.sglang.server.metrics import counters

    try:
        timeout = aiohttp.ClientTimeout(total=METRICS_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as http, http.get(url + "/metrics") as resp:
            if resp.status != 200:
                return {}
            return counters(await resp.text(errors="replace"))
    except (aiohttp.ClientError, asyncio.TimeoutError, UnicodeDecodeError):
        return {}


def _gpu_summary(seen: list[GpuSample], notices: list[str]) -> dict[str, Any]:
    by_gpu: dict[int, list[GpuSample]] = {}
    for s in seen:
        by_gpu.setdefault(s.index, []).append(s)
    gpus = []
    for index, samples in sorted(by_gpu.items()):
        util = [s.util_pct for s in samples if s.util_pct is not None]
        mem = [s.mem_used_mib for s in samples if s.mem_used_mib is not None]
        gpus.append(
            {
                "index": index,
                "samples": len(samples),
                "util_pct_mean": sum(util) / len(util) if util else None,
                "mem_used_mib_max": max(mem) if mem else None,
            }
        )
    return {"gpus": gpus, "notices": sorted(set(notices))[:3]}


def _level_words(level: dict[str, Any]) -> str:
    lv = level["level"]
    verdict = "meets the SLOs" if level["slo_met"] else "misses: " + "; ".join(level["missed"])
    return f"{lv['output_tokens_per_s']:.1f} tok/s, goodput {level['goodput_rps']:.2f} req/s, {verdict}"
