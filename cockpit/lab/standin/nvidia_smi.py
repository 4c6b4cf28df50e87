"""The lab's `nvidia-smi` STAND-IN: the lab has no GPU, and the cockpit's GPU hygiene and
telemetry need one to read. It prints the real tool's formats (as an H200 with driver
580.159.04 printed them: tests/data/nvidia-smi/, tests/data/gpu/), for eight H200s whose
memory is held by exactly the processes whose environment says so:

    COCKPIT_STANDIN_GPU_MIB=<MiB>       held on each GPU the process uses
    COCKPIT_STANDIN_GPUS=0,1,...        which GPUs (default: all eight)

so a test, or anyone, makes a process look like a GPU worker (`systemd-run -E
COCKPIT_STANDIN_GPU_MIB=70000 sleep 600`). Only environments this user may read are seen
(the real tool sees every process; the lab's tests read as root).

It answers `--query-gpu=FIELDS` and `--query-compute-apps=FIELDS` with `--format=csv[,noheader]
[,nounits]` and `-lms N`, and `-q -d MEMORY,PIDS` with `-l S` or `-lms N`, as the real tool does;
anything else is refused with the real tool's exit status 2 and a sentence that says this is the
stand-in.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

BANNER = "nvidia-smi STAND-IN of the cockpit lab (no GPU here; formats of NVIDIA-SMI 580.159.04)"
GPUS = 8
NAME = "NVIDIA H200"
TOTAL_MIB = 143771
INVALID = 2  # the real tool's exit status for a query it does not know

# field -> (header unit, idle value): the idle values and units of the real H200 (query-idle.csv).
GPU_FIELDS: dict[str, tuple[str, str]] = {
    "timestamp": ("", ""),
    "index": ("", ""),
    "name": ("", NAME),
    "uuid": ("", ""),
    "utilization.gpu": ("%", "0"),
    "utilization.memory": ("%", "0"),
    "memory.used": ("MiB", ""),
    "memory.total": ("MiB", str(TOTAL_MIB)),
    "power.draw": ("W", "127.29"),
    "power.limit": ("W", "700.00"),
    "temperature.gpu": ("", "39"),
    "clocks.current.sm": ("MHz", "1980"),
    "clocks.sm": ("MHz", "1980"),
}
HEADER_NAMES = {"clocks.sm": "clocks.current.sm"}  # the real header prints the long name
APP_FIELDS: dict[str, str] = {"pid": "", "process_name": "", "used_gpu_memory": "MiB", "gpu_uuid": "", "gpu_name": ""}


class Holder:
    """A process the stand-in shows holding memory: `mib` on each of `gpus`."""

    __slots__ = ("pid", "name", "mib", "gpus")

    def __init__(self, pid: int, name: str, mib: int, gpus: tuple[int, ...]) -> None:
        self.pid, self.name, self.mib, self.gpus = pid, name, mib, gpus


def gpu_uuid(index: int) -> str:
    """A stable UUID per lab and GPU, in the real `GPU-8-4-4-4-12` form."""
    h = hashlib.sha256(f"{os.uname().nodename}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _environ(pid: str) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def _name(pid: str) -> str:
    """The executable's path, as the real tool prints it; the command name where unreadable."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        try:
            with open(f"/proc/{pid}/comm") as f:
                return f.read().strip()
        except OSError:
            return "[Not Found]"


def holders() -> list[Holder]:
    found = []
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        env = _environ(pid)
        mib = env.get("COCKPIT_STANDIN_GPU_MIB", "")
        if not mib.isdigit() or int(pid) == os.getpid():
            continue
        listed = env.get("COCKPIT_STANDIN_GPUS", "")
        gpus = (
            tuple(int(g) for g in listed.split(",") if g.strip().isdigit() and int(g) < GPUS)
            if listed
            else tuple(range(GPUS))
        )
        found.append(Holder(int(pid), _name(pid), int(mib), gpus))
    return found


def _cell(value: str, unit: str, units: bool) -> str:
    return f"{value} {unit}" if units and unit and value not in ("[N/A]",) else value


def _gpu_rows(fields: list[str], units: bool, held: list[Holder]) -> list[list[str]]:
    now = time.time()
    stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"
    rows = []
    for index in range(GPUS):
        used = min(sum(h.mib for h in held if index in h.gpus), TOTAL_MIB)  # a GPU has no more to give
        live = {"timestamp": stamp, "index": str(index), "uuid": gpu_uuid(index), "memory.used": str(used)}
        rows.append([_cell(live.get(f) or GPU_FIELDS[f][1], GPU_FIELDS[f][0], units) for f in fields])
    return rows


def _app_rows(fields: list[str], units: bool, held: list[Holder]) -> list[list[str]]:
    rows = []
    for index in range(GPUS):  # the real tool lists them GPU by GPU
        for h in held:
            if index in h.gpus:
                live = {
                    "pid": str(h.pid),
                    "process_name": h.name,
                    "used_gpu_memory": str(h.mib),
                    "gpu_uuid": gpu_uuid(index),
                    "gpu_name": NAME,
                }
                rows.append([_cell(live[f], APP_FIELDS[f], units) for f in fields])
    return rows


def _header(fields: list[str], units: dict[str, str], with_units: bool) -> str:
    return ", ".join(
        f"{HEADER_NAMES.get(f, f)} [{units[f]}]" if units[f] and with_units else HEADER_NAMES.get(f, f) for f in fields
    )


RESERVED_MIB, BAR1_MIB = 616, 262144  # the real H200's (tests/data/nvidia-smi/q-memory-pids/)


def _q_line(indent: int, key: str, value: str, width: int = 55) -> str:
    """`        Used                       : 0 MiB`: the real tool pads each key to one column
    (55 for the GPU's fields, 42 for a process's)."""
    return f"{' ' * indent}{key}".ljust(width) + f": {value}"


def _q_block(held: list[Holder]) -> str:
    """One block of `-q -d MEMORY,PIDS`, as the real tool prints it each period (one H200 was
    read: several GPUs' sections are printed one after another, each ending in a blank line)."""
    lines = [
        "",
        "==============NVSMI LOG==============",
        "",
        _q_line(0, "Timestamp", time.strftime("%a %b %e %H:%M:%S %Y")),
        _q_line(0, "Driver Version", "580.159.04"),
        _q_line(0, "CUDA Version", "13.0"),
        "",
        _q_line(0, "Attached GPUs", str(GPUS)),
    ]
    for index in range(GPUS):
        on = [h for h in held if index in h.gpus]
        used = min(sum(h.mib for h in on), TOTAL_MIB - RESERVED_MIB)
        lines += [
            f"GPU 00000000:{0x18 + 0x10 * index:02X}:00.0",
            "    FB Memory Usage",
            _q_line(8, "Total", f"{TOTAL_MIB} MiB"),
            _q_line(8, "Reserved", f"{RESERVED_MIB} MiB"),
            _q_line(8, "Used", f"{used} MiB"),
            _q_line(8, "Free", f"{TOTAL_MIB - RESERVED_MIB - used} MiB"),
            "    BAR1 Memory Usage",
            _q_line(8, "Total", f"{BAR1_MIB} MiB"),
            _q_line(8, "Used", f"{used + 1} MiB"),
            _q_line(8, "Free", f"{BAR1_MIB - used - 1} MiB"),
            "    Conf Compute Protected Memory Usage",
            _q_line(8, "Total", "0 MiB"),
            _q_line(8, "Used", "0 MiB"),
            _q_line(8, "Free", "0 MiB"),
        ]
        if not on:
            lines.append(_q_line(4, "Processes", "None"))
        else:
            lines.append("    Processes")
            for h in on:
                lines += [
                    _q_line(8, "GPU instance ID", "N/A", 42),
                    _q_line(8, "Compute instance ID", "N/A", 42),
                    _q_line(8, "Process ID", str(h.pid), 42),
                    _q_line(12, "Type", "C", 42),
                    _q_line(12, "Name", h.name, 42),
                    _q_line(12, "Used GPU Memory", f"{h.mib} MiB", 42),
                ]
        lines.append("")
    return "\n".join(lines) + "\n"


def _query_q(argv: list[str]) -> int:
    """`-q -d MEMORY,PIDS [-l S | -lms MS]`: the blocks, once or every period."""
    if argv[1:3] != ["-d", "MEMORY,PIDS"]:
        return _refuse("The stand-in answers -q only with -d MEMORY,PIDS.")
    period = 0.0
    for i, arg in enumerate(argv):
        if arg in ("-l", "-lms") and i + 1 < len(argv) and argv[i + 1].isdigit():
            period = int(argv[i + 1]) / (1 if arg == "-l" else 1000)
        elif arg not in ("-q", "-d", "MEMORY,PIDS") and not (arg.isdigit() and argv[i - 1] in ("-l", "-lms")):
            return _refuse(f'Invalid combination of input arguments. "{arg}" is not answered by the stand-in.')
    while True:
        sys.stdout.write(_q_block(holders()))
        sys.stdout.flush()
        if not period:
            return 0
        time.sleep(period)


def _refuse(sentence: str) -> int:
    print(f"{sentence}\n{BANNER}. Run `nvidia-smi --help` for what it answers.")
    return INVALID


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(f"{BANNER}\n\nAnswers --query-gpu=FIELDS and --query-compute-apps=FIELDS")
        print("with --format=csv[,noheader][,nounits], and -lms MS.")
        print(f"GPU fields: {', '.join(GPU_FIELDS)}\nApp fields: {', '.join(APP_FIELDS)}")
        return 0
    if argv[0] == "-q":
        return _query_q(argv)
    query, form, period = "", "", 0.0
    for i, arg in enumerate(argv):
        if arg.startswith(("--query-gpu=", "--query-compute-apps=")):
            query = arg
        elif arg.startswith("--format="):
            form = arg.split("=", 1)[1]
        elif arg == "-lms" and i + 1 < len(argv) and argv[i + 1].isdigit():
            period = int(argv[i + 1]) / 1000
        elif arg.isdigit() and i and argv[i - 1] == "-lms":
            continue
        else:
            return _refuse(f'Invalid combination of input arguments. "{arg}" is not answered by the stand-in.')
    options = set(form.split(","))
    if not query or "csv" not in options or options - {"csv", "noheader", "nounits"}:
        return _refuse("The stand-in answers only --query-gpu or --query-compute-apps with --format=csv.")
    kind, _, listed = query.partition("=")
    known = GPU_FIELDS if kind == "--query-gpu" else APP_FIELDS
    fields = [f.strip() for f in listed.split(",")]
    for f in fields:
        if f not in known:
            return _refuse(f'Field "{f}" is not a valid field to query.')
    units = {f: (GPU_FIELDS[f][0] if kind == "--query-gpu" else APP_FIELDS[f]) for f in fields}
    header = "noheader" not in options  # printed once, before the first sample, with -lms too
    while True:
        held = holders()
        rows = (_gpu_rows if kind == "--query-gpu" else _app_rows)(fields, "nounits" not in options, held)
        out = [_header(fields, units, "nounits" not in options)] if header else []
        header = False
        out += [", ".join(row) for row in rows]
        if out:
            sys.stdout.write("\n".join(out) + "\n")
            sys.stdout.flush()
        if not period:
            return 0
        time.sleep(period)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(0)
