"""GPU telemetry: one long-lived `nvidia-smi --query-gpu ... -lms 500` stream per host.

One process printing a CSV row per GPU every period costs nothing after it starts; running
`nvidia-smi` twice a second would cost a process (and over SSH a channel and a remote shell)
each time. The columns come back in the order they were asked for, so the parser maps them
by the same field list; output recorded with a header (and units) maps its columns from it.

Nothing here is fatal: a value the GPU cannot give (`[N/A]`, `[Not Supported]`) becomes
None plus a notice, a line that does not parse becomes a notice, a stream that stops is
reported with nvidia-smi's stderr and started again, and a host without nvidia-smi says
"no GPU telemetry on HOST" once. Only the standard library is used, so the sampler also runs
on a GPU machine that has nothing but Python (the one real-GPU check does exactly that).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cockpit.remote.base import Host, HostError, LineStream

QUERY_FIELDS: tuple[str, ...] = (
    "timestamp",
    "index",
    "uuid",
    "name",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "memory.total",
    "power.draw",
    "power.limit",
    "temperature.gpu",
    "clocks.current.sm",
)

# Query field -> GpuSample attribute, for the numeric columns. `clocks.sm` is nvidia-smi's
# short alias of `clocks.current.sm`; its header always prints the long name.
_NUMERIC = {
    "utilization.gpu": "util_pct",
    "utilization.memory": "mem_util_pct",
    "memory.used": "mem_used_mib",
    "memory.total": "mem_total_mib",
    "power.draw": "power_w",
    "power.limit": "power_limit_w",
    "temperature.gpu": "temp_c",
    "clocks.current.sm": "sm_clock_mhz",
    "clocks.sm": "sm_clock_mhz",
}
_TEXT = {"timestamp": "stamp", "uuid": "uuid", "name": "name"}
# What a shell or exec says when the program does not exist (bash, dash, LocalHost).
_MISSING_MARKERS = ("command not found", ": not found", "No such file or directory")


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one instant. A value the GPU did not give is None and named in `missing`."""

    index: int
    time: float  # when the line arrived here (epoch seconds)
    stamp: str | None = None  # nvidia-smi's own timestamp, in the host's local time
    uuid: str | None = None
    name: str | None = None
    util_pct: float | None = None
    mem_util_pct: float | None = None  # memory-controller busy time, not memory used
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    missing: tuple[str, ...] = ()  # "power.draw: [N/A]" for each value the GPU did not give


NoticeKind = Literal["unavailable", "ended", "garbage", "unsupported"]


@dataclass(frozen=True, slots=True)
class GpuNotice:
    """Something the user should see beside the GPU rows; never an exception.

    unavailable: the host has no nvidia-smi (the sampler stops); ended: the stream stopped
    (the sampler starts it again); garbage: a line that is not a sample; unsupported: a GPU
    gives no value for a field (said once per GPU and field, not every period).
    """

    kind: NoticeKind
    message: str
    detail: str = ""  # nvidia-smi's stderr, or the offending line


class GpuLineError(ValueError):
    """A line that is not a row of the query (nvidia-smi's errors come on stdout too)."""


def fields_from_header(header: str) -> tuple[str, ...]:
    """`index, utilization.gpu [%], ...` (the `--format=csv` header) -> the query fields."""
    return tuple(col.strip().split(" [", 1)[0] for col in header.split(","))


def query_argv(
    fields: Sequence[str] = QUERY_FIELDS, interval_ms: int = 500, nvidia_smi: str = "nvidia-smi"
) -> list[str]:
    return [nvidia_smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-lms", str(interval_ms)]


def parse_line(line: str | bytes, fields: Sequence[str] = QUERY_FIELDS, now: float | None = None) -> GpuSample:
    """One CSV row -> a sample; with or without units (`62579 MiB` or `62579`).

    Raises GpuLineError for anything else: a wrong column count, an index or number that is
    not one. Missing values are not errors: they are None and listed in `missing`.
    """
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    text = text.strip()
    # Names hold no commas (nvidia-smi prints "NVIDIA H200"), so a plain split is exact.
    cols = text.split(", ")
    if len(cols) != len(fields):
        raise GpuLineError(f"expected {len(fields)} columns, got {len(cols)}: {text[:200]!r}")
    # GpuSample's keyword arguments, named at run time from _NUMERIC (float values) and _TEXT
    # (str values): no static type says which name gets which, so the values are Any.
    values: dict[str, Any] = {}
    missing: list[str] = []
    index: int | None = None
    for field, raw in zip(fields, cols, strict=True):
        raw = raw.strip()
        if raw.startswith("[") or raw == "N/A":
            missing.append(f"{field}: {raw}")
            continue
        if field == "index":
            if not raw.isdigit():
                raise GpuLineError(f"GPU index {raw!r} is not a number: {text[:200]!r}")
            index = int(raw)
        elif field in _NUMERIC:
            number = raw.split(" ", 1)[0]  # drop a unit: "80.15 W"
            try:
                values[_NUMERIC[field]] = float(number)
            except ValueError:
                raise GpuLineError(f"{field} {raw!r} is not a number: {text[:200]!r}") from None
        elif field in _TEXT:
            values[_TEXT[field]] = raw
    if index is None:
        raise GpuLineError(f"no GPU index in {text[:200]!r}")
    return GpuSample(index=index, time=time.time() if now is None else now, missing=tuple(missing), **values)


class _Rounds:
    """Groups rows into rounds (one row per GPU per period) so a UI redraws once per period.

    nvidia-smi does not mark a round's end. A round ends when an index repeats; once the
    number of GPUs is known (the largest round seen), a full round is delivered at once
    instead of waiting for the next period's first row.
    """

    def __init__(self) -> None:
        self.pending: list[GpuSample] = []
        self.size = 0

    def add(self, sample: GpuSample) -> list[list[GpuSample]]:
        """The rounds this row completes (none, one, or two while the GPU count is being learnt)."""
        done = []
        if any(s.index == sample.index for s in self.pending):
            done.append(self.take())
        self.pending.append(sample)
        if self.size and len(self.pending) >= self.size:
            done.append(self.take())
        return done

    def take(self) -> list[GpuSample]:
        done, self.pending = self.pending, []
        self.size = max(self.size, len(done))
        return done


SamplesCallback = Callable[[list[GpuSample]], None]
NoticeCallback = Callable[[GpuNotice], None]


class GpuSampler:
    """Runs nvidia-smi on a host and hands rounds of samples and notices to callbacks.

    `run()` keeps a stream going until cancelled (cancelling it ends the remote process),
    starting it again after it stops; `run_once()` is one stream, returning why it ended.
    """

    def __init__(
        self,
        host: Host,
        *,
        interval_ms: int = 500,
        fields: Sequence[str] = QUERY_FIELDS,
        nvidia_smi: str = "nvidia-smi",
        restart_s: float = 2.0,
        max_restart_s: float = 30.0,
    ) -> None:
        self.host = host
        self.fields = tuple(fields)
        self.argv = query_argv(self.fields, interval_ms, nvidia_smi)
        self.restart_s = restart_s
        self.max_restart_s = max_restart_s

    async def run(self, on_samples: SamplesCallback, on_notice: NoticeCallback) -> None:
        """Until cancelled, or until the host turns out to have no nvidia-smi."""
        delay = self.restart_s
        while True:
            end, delivered = await self._stream(on_samples, on_notice)
            on_notice(end)
            if end.kind == "unavailable":
                return
            # A stream that never produced a row (a driver error, say) backs off; one that did is
            # restarted promptly, as the GPU was working a moment ago.
            delay = self.restart_s if delivered else min(delay * 2, self.max_restart_s)
            await asyncio.sleep(delay)

    async def run_once(self, on_samples: SamplesCallback, on_notice: NoticeCallback) -> GpuNotice:
        """One nvidia-smi process: returns the notice saying why it ended."""
        end, _ = await self._stream(on_samples, on_notice)
        return end

    async def _stream(self, on_samples: SamplesCallback, on_notice: NoticeCallback) -> tuple[GpuNotice, int]:
        rounds = _Rounds()
        reported: set[str] = set()
        delivered = 0
        said = ""  # a non-sample line just before the end: nvidia-smi prints its errors on stdout
        try:
            async with self.host.stream(self.argv) as lines:
                async for raw in lines:
                    try:
                        sample = parse_line(raw, self.fields)
                    except GpuLineError:
                        text = said = raw.decode("utf-8", "replace").strip()
                        if text and text not in reported and len(reported) < 100:
                            reported.add(text)
                            on_notice(
                                GpuNotice(
                                    "garbage",
                                    f"nvidia-smi on {self.host.name} printed a line that is not a sample",
                                    text,
                                )
                            )
                        continue
                    said = ""
                    for item in sample.missing:
                        key = f"{sample.index}:{item}"
                        if key not in reported:
                            reported.add(key)
                            on_notice(
                                GpuNotice(
                                    "unsupported", f"GPU {sample.index} on {self.host.name} gives no {item}", item
                                )
                            )
                    for done in rounds.add(sample):
                        delivered += len(done)
                        on_samples(done)
                if rounds.pending:
                    done = rounds.take()
                    delivered += len(done)
                    on_samples(done)
                return await self._ended(lines, said), delivered
        except FileNotFoundError as e:  # LocalHost: no such executable
            return self._unavailable(str(e)), delivered
        except (HostError, OSError) as e:
            return GpuNotice("ended", f"GPU telemetry from {self.host.name} stopped: {e}", str(e)), delivered

    async def _ended(self, lines: LineStream, said_on_stdout: str) -> GpuNotice:
        stderr = await lines.stderr_text() or said_on_stdout
        code = lines.returncode
        for _ in range(20):  # the exit status can trail the end of stdout by a moment
            if code is not None:
                break
            await asyncio.sleep(0.05)
            code = lines.returncode
        if code == 127 or any(m in stderr for m in _MISSING_MARKERS):
            return self._unavailable(stderr)
        status = "" if code is None else f" (nvidia-smi exited with status {code})"
        reason = f": {stderr.splitlines()[-1]}" if stderr else ""
        return GpuNotice("ended", f"GPU telemetry from {self.host.name} stopped{status}{reason}", stderr)

    def _unavailable(self, detail: str) -> GpuNotice:
        return GpuNotice("unavailable", f"no GPU telemetry on {self.host.name}", detail)
