"""Before a start: what other processes hold that the unit will need, its GPUs and its port.

A restart stops the unit's own processes, so their memory does not count; what counts is
everything else: another unit, a process started by hand, or a left-over of an earlier start
of this very unit (SGLang's schedulers reparented to PID 1 after a crash, sglang #23627).
SGLang claims `--mem-fraction-static` of each GPU's total at start-up; when what the others
hold leaves less than that, it fails ("The memory capacity is unbalanced", or out of memory
while loading weights). That is an error here. Memory held but leaving room is a warning. When
the flag is not given SGLang picks the share itself, and the finding stays a warning: the
static layer never guesses an error.

A listener on the server's `--port` (or node 0's `--dist-init-addr` port) that is not the
unit's running start keeps SGLang from binding it: an error, named by PID.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cockpit.fmt import duration
from cockpit.remote.base import Host, HostError
from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.preflight.preflight import ERROR, WARNING, Finding, given_flags
from cockpit.sglang.server.ranks import node_rank, number, ranks_on_node
from cockpit.systemd import gpu_use, listeners
from cockpit.systemd.gpu_use import GpuUse, by_pid, held_on
from cockpit.systemd.process_end import holder
from cockpit.systemd.process_facts import Viewpoint

RULE = "gpu-held-by-other"
PORT_RULE = "port-held-by-other"
DEFAULT_PORT = 30000  # launch_server's --port when none is given


def gpus_of(flags: Mapping[str, str | None], env: Mapping[str, str], count: int) -> list[int]:
    """The GPU indices (as nvidia-smi numbers them) the server's ranks on this node use:
    tp x pp (x dp without DP attention) over the nodes, from `--base-gpu-id` by
    `--gpu-id-step`, through the unit's CUDA_VISIBLE_DEVICES where it sets one."""
    ranks = ranks_on_node(flags)
    base, step = int(number(flags, "--base-gpu-id", 0)), int(number(flags, "--gpu-id-step", 1))
    local = [base + i * step for i in range(ranks)]
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if visible:
        local = [int(visible[i]) for i in local if i < len(visible) and visible[i].isdigit()]
    return [i for i in local if i < count]


def findings_of(
    use: GpuUse, flags: Mapping[str, str | None], env: Mapping[str, str], view: Viewpoint, host: str
) -> list[Finding]:
    """One finding per process outside the unit that holds memory on one of its GPUs."""
    if not use.gpus:
        return []
    wanted = set(gpus_of(flags, env, len(use.gpus)))
    totals = {g.index: g.total_mib for g in use.gpus}
    fraction = flags.get("--mem-fraction-static")
    share = number(flags, "--mem-fraction-static", 0.0)
    held = by_pid(sorted((p for p in use.processes if p.gpu in wanted and p.outside(view)), key=lambda p: p.gpu or 0))
    others_on: dict[int, int] = {}
    for procs in held.values():
        for p in procs:
            others_on[p.gpu or 0] = others_on.get(p.gpu or 0, 0) + (p.used_mib or 0)
    findings = []
    for pid, procs in sorted(held.items()):
        first = procs[0]
        gpus = [p.gpu for p in procs if p.gpu is not None]
        memory = held_on(procs, lambda mib: f"{mib} MiB")
        short = [g for g in gpus if fraction is not None and totals[g] - others_on[g] < share * totals[g]]
        age = f", running {duration(first.age_s)}" if first.age_s is not None else ""
        owner = first.owner(view)
        said = f"PID {pid} ({first.name}) holds {memory} of {view.unit} on {host}{age}; owner: {owner}"
        offered = holder(pid, first.name, memory, first, view)
        if short:
            findings.append(
                Finding(
                    ERROR,
                    RULE,
                    ["--mem-fraction-static"],
                    f"{said}. With it, GPU {short[0]} has {totals[short[0]] - others_on[short[0]]} MiB free, less than "
                    f"the {share:g} share ({int(share * totals[short[0]])} MiB) SGLang claims at start.",
                    "RuntimeError",
                    f"End PID {pid} (the write modal offers it), or lower --mem-fraction-static.",
                    pid=pid,
                    holder=offered,
                )
            )
        else:
            findings.append(
                Finding(
                    WARNING,
                    RULE,
                    [],
                    f"{said}."
                    + (
                        ""
                        if fraction is not None
                        else " SGLang picks its memory share itself (no --mem-fraction-static)."
                    ),
                    None,
                    f"End PID {pid} if it should not be there (the write modal offers it).",
                    pid=pid,
                    holder=offered,
                )
            )
    return findings


def ports_of(flags: Mapping[str, str | None]) -> dict[int, str]:
    """The ports this node's server binds: --port, and node 0's dist-init port."""
    ports = {int(number(flags, "--port", DEFAULT_PORT)): "--port"}
    addr = flags.get("--dist-init-addr") or ""
    if addr.rpartition(":")[2].isdigit() and node_rank(flags) == 0:
        ports.setdefault(int(addr.rpartition(":")[2]), "--dist-init-addr")
    return ports


def port_findings(
    holders: Sequence[listeners.PortHolder], flags: Mapping[str, str | None], view: Viewpoint, host: str
) -> list[Finding]:
    findings = []
    for port, flag in sorted(ports_of(flags).items()):
        for h in holders:
            if h.port != port or not h.outside(view):
                continue
            who = f"PID {h.pid} ({h.name})" if h.pid is not None else "a process"
            findings.append(
                Finding(
                    ERROR,
                    PORT_RULE,
                    [flag],
                    f"{who} listens on {h.address}:{port} on {host}, {view.unit}'s {flag}; "
                    f"owner: {h.owner(view)}. SGLang cannot bind it.",
                    "OSError",
                    f"End PID {h.pid} (the write modal offers it), or give {flag} another port."
                    if h.pid is not None
                    else f"Find it with `sudo ss -ltnp 'sport = :{port}'`, or give {flag} another port.",
                    pid=h.pid,
                    holder=holder(h.pid, h.name, f"{h.address}:{port}", h, view) if h.pid is not None else None,
                )
            )
    return findings


async def check_host(
    host: Host,
    argv: Sequence[str],
    catalog: Catalog,
    view: Viewpoint,
    env: Mapping[str, str] | None = None,
    use: GpuUse | None = None,
) -> list[Finding]:
    """What the host holds now that the unit will need: its GPUs' memory, its ports. `use`: the
    GPU table where the caller has read it already (the model checks need it too)."""
    flags = given_flags(argv, catalog)
    use = use if use is not None else await gpu_use.read_or_say(host)
    found = findings_of(use, flags, env or {}, view, host.name)
    try:
        found += port_findings(await listeners.read(host), flags, view, host.name)
    except HostError as e:
        found.append(Finding(WARNING, PORT_RULE, [], f"the listeners of {host.name} could not be read: {e}"))
    return found
