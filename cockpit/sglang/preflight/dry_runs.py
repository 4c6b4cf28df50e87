"""The dry run's verdicts, kept by (release, flags), for an editor that asks at every pause in typing.

One dry run imports SGLang on the host (about 7 s); an operator who turns a flag off and on again
asks the same question twice. A Python that cannot import SGLang is remembered as such for its
release, so an editor on such a host asks once and then keeps to the static layer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from cockpit.remote.base import Host
from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.preflight.preflight import ERROR, INFO, Finding, dry_run

KEEP = 64  # verdicts kept per session: an editing session's worth of distinct flag sets


@dataclass(frozen=True)
class Verdict:
    host: str
    release: str
    outcome: str  # "passed", "failed", or "not run: why"
    findings: tuple[Finding, ...] = ()

    @property
    def decided(self) -> bool:
        """SGLang itself answered: its verdict replaces the static layer's."""
        return self.outcome in ("passed", "failed")

    def said(self) -> Finding:
        """The verdict as the pre-flight reports it, beside the findings it made."""
        return Finding(INFO, "dry-run", [], f"SGLang's own argument resolution on {self.host}: {self.outcome}")


def replace_static(static: Sequence[Finding], verdict: Verdict | None) -> list[Finding]:
    """What the pre-flight says of an edit: the static layer's findings until SGLang's own verdict
    is in, then that verdict in place of the static errors (warnings and notes stay). SGLang says
    what failed, not what to do: a static rule that predicted the same exception on the same flags
    lends the verdict its fix."""
    if verdict is None or not verdict.decided:
        return list(static)
    errors = [f for f in static if f.severity == ERROR and f.fix]
    found = []
    for finding in verdict.findings:
        if finding.fix is None:
            same = (f for f in errors if f.would_raise == finding.would_raise and set(f.flags) & set(finding.flags))
            finding = replace(finding, fix=next((f.fix for f in same), None))
        found.append(finding)
    return [f for f in static if f.severity != ERROR] + found


class DryRuns:
    def __init__(self, keep: int = KEEP) -> None:
        self._kept: OrderedDict[tuple[str, str, tuple[str, ...], tuple[tuple[str, str], ...]], Verdict] = OrderedDict()
        self._no_sglang: dict[tuple[str, str], Verdict] = {}
        self.keep = keep
        self.runs = 0  # dry runs actually started on a host

    async def verdict(
        self,
        host: Host,
        python: str,
        argv: Sequence[str],
        catalog: Catalog,
        environment: Mapping[str, str] | None = None,
    ) -> Verdict:
        """SGLang's own verdict on `argv` with the unit's `environment`, kept by both."""
        release = catalog.version or "unknown"
        key = (python, release, tuple(argv), tuple(sorted((environment or {}).items())))
        unable = self._no_sglang.get((python, release))
        if unable is not None:
            return unable
        if key in self._kept:
            self._kept.move_to_end(key)
            return self._kept[key]
        self.runs += 1
        outcome, findings = await dry_run(host, python, argv, catalog, environment=environment)
        verdict = Verdict(host.name, release, outcome, tuple(findings))
        if "cannot import SGLang" in outcome:
            self._no_sglang[(python, release)] = verdict
        elif verdict.decided:  # a timeout or a lost connection is asked again next time
            self._kept[key] = verdict
            while len(self._kept) > self.keep:
                self._kept.popitem(last=False)
        return verdict
