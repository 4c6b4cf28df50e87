"""`cockpit lab up|down|status|ssh`: a real systemd host in a container, reached over SSH.

`up` boots the cached image with `systemd-nspawn --boot --volatile=overlay` inside the lab's
own network namespace, in a cgroup of its own (this jump box's PID 1 need not be systemd:
docs/facts.md lists what that takes), waits for sshd, and writes an ssh_config and a known_hosts
of the lab's own host key. `down` stops what `up` started, by the PID it recorded, then
removes the namespace and the cgroups; it is safe to run twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import cockpit
from cockpit.config import Config
from cockpit.config import parse as parse_config
from cockpit.errors import CockpitError, UsageError
from cockpit.fmt import cockpit_command
from cockpit.lab import image, network
from cockpit.lab.paths import DEFAULT_NAME, run_root, state_root
from cockpit.localfs import remove_stale
from cockpit.sglang.catalog.releases import cache_root, sglang_source

DEFAULT_SGLANG = "0.5.23"
GUEST_DIR = Path(__file__).with_name("guest")
MAX_LABS = 64


@dataclass(frozen=True)
class LabInfo:
    name: str
    index: int
    address: str
    pid: int
    sglang_version: str
    started_at: float
    ssh_config: str
    known_hosts: str
    release: str = image.DEFAULT_RELEASE
    site_packages: str = image.RELEASES[image.DEFAULT_RELEASE].site_packages  # where its SGLang source is
    real_sglang: bool = False  # the service Python really imports SGLang (`lab up --real-sglang`)

    def to_json(self) -> dict:
        return asdict(self)


def _check_name(name: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,30}", name):
        raise UsageError(f"lab name {name!r}: use 1 to 31 lowercase letters, digits or '-', starting with a letter")
    return name


def _require_root() -> None:
    if os.geteuid() != 0:
        raise CockpitError(
            "the lab needs root (it creates a network namespace and boots a container): run it with sudo"
        )


def _cgroup_dirs(name: str) -> list[Path]:
    """This lab's cgroup in each hierarchy the jump box mounts (hybrid or unified)."""
    base = Path("/sys/fs/cgroup")
    roots = [base / "unified", base / "systemd"] if (base / "unified").is_dir() else [base]
    return [r / f"cockpit-lab-{name}" for r in roots if r.is_dir()]


def _pids_in(cgroup: Path) -> set[int]:
    pids: set[int] = set()
    for procs in cgroup.rglob("cgroup.procs"):
        with contextlib.suppress(OSError):
            pids.update(int(p) for p in procs.read_text().split())
    return pids


def _remove_cgroup(cgroup: Path, timeout: float = 0.0) -> bool:
    """Remove the cgroup, deepest first; True once it is gone. A cgroup v2 directory refuses
    rmdir (EBUSY) while members that have exited wait to be reaped, after its cgroup.procs
    lists none: hence the retries until `timeout`."""
    deadline = time.monotonic() + timeout
    while cgroup.exists():
        for d in sorted((p for p in cgroup.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                d.rmdir()
        with contextlib.suppress(OSError):
            cgroup.rmdir()
        if cgroup.exists() and time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _is_lab_process(pid: int, name: str) -> bool:
    """Alive and inside this lab's cgroup: a PID reused by anything else never matches, and
    nspawn that died unreaped (a zombie still shows its cgroup) is not alive."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        return state not in ("Z", "X") and f"/cockpit-lab-{name}" in Path(f"/proc/{pid}/cgroup").read_text()
    except (OSError, IndexError):
        return False


def _sshd_answers(address: str, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((address, 22), timeout=timeout) as s:
            s.settimeout(timeout)
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False


class Lab:
    def __init__(self, name: str = DEFAULT_NAME) -> None:
        self.name = _check_name(name)
        self.run_dir = run_root() / self.name
        self.state_dir = state_root() / self.name

    # -- files ----------------------------------------------------------------------------

    @property
    def ssh_config(self) -> Path:
        return self.state_dir / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        return self.state_dir / "known_hosts"

    @property
    def client_key(self) -> Path:
        return self.state_dir / "id_ed25519"

    @property
    def guest_keys(self) -> Path:
        return self.state_dir / "guest"

    @property
    def units_dir(self) -> Path:
        """Unit files put here are installed and enabled at every boot of the lab (its root is a
        fresh overlay each time), beside the demo unit: for tests, and for units of your own."""
        return self.state_dir / "units"

    def _info_path(self) -> Path:
        return self.run_dir / "lab.json"

    def info(self) -> LabInfo | None:
        """The running lab's facts, or None when it is not running."""
        try:
            data = json.loads(self._info_path().read_text())
        except (OSError, ValueError):
            return None
        info = LabInfo(**data)
        return info if _is_lab_process(info.pid, self.name) else None

    # -- up -------------------------------------------------------------------------------

    def up(
        self,
        sglang_version: str = DEFAULT_SGLANG,
        timeout: float = 30.0,
        progress=print,
        release: str = image.DEFAULT_RELEASE,
        real_sglang: bool = False,
    ) -> LabInfo:
        _require_root()
        running = self.info()
        if running is not None:
            if (running.release, running.real_sglang) != (release, real_sglang):
                wanted = f"{release}{' with a real SGLang' if real_sglang else ''}"
                raise UsageError(
                    f"the lab {self.name} is up on {running.release}"
                    f"{' with a real SGLang' if running.real_sglang else ''}: take it down first "
                    f"(`{cockpit_command()} lab down --name {self.name}`) to boot it on {wanted}"
                )
            return running
        chosen = image.release(release)
        recipe = image.Recipe(suite=chosen.suite, real_sglang=sglang_version if real_sglang else None)
        if real_sglang:
            image.real_sglang_lock(sglang_version)  # a release with no lock is refused before any build
        rootfs = image.build(recipe, progress=progress)
        # The real-SGLang image has the release installed; the plain one is shown its source.
        source = None if real_sglang else sglang_source(sglang_version, progress=progress)
        self._ensure_keys()
        run_root().mkdir(parents=True, exist_ok=True)
        with open(run_root() / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._stop_leftovers()
            if not running_labs():  # no lab can have an aside-renamed tree mounted now
                for cache in (image.images_root(), cache_root() / "sglang"):
                    if cache.is_dir():
                        remove_stale(cache)
            index = self._free_index()
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / "index").write_text(f"{index}\n")
        net = network.LabNet(self.name, index)
        network.create(net)
        started = time.time()
        pid = self._launch(rootfs, source, chosen, net)
        info = LabInfo(
            name=self.name,
            index=index,
            address=net.address,
            pid=pid,
            sglang_version=sglang_version,
            started_at=started,
            ssh_config=str(self.ssh_config),
            known_hosts=str(self.known_hosts),
            release=chosen.suite,
            site_packages=chosen.site_packages,
            real_sglang=real_sglang,
        )
        self._info_path().write_text(json.dumps(info.to_json()))
        self._write_ssh_files(info)
        deadline = time.monotonic() + timeout
        while not _sshd_answers(net.address):
            if not _is_lab_process(pid, self.name):
                tail = self._console_tail()
                self.down()
                raise CockpitError(f"the lab {self.name} stopped while booting: {tail}")
            if time.monotonic() > deadline:
                tail = self._console_tail()
                self.down()
                raise CockpitError(f"the lab {self.name} did not answer SSH within {timeout:.0f} s: {tail}")
            time.sleep(0.05)
        return info

    def _ensure_keys(self) -> None:
        self.guest_keys.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state_dir, 0o700)
        for key, comment in (
            (self.client_key, "cockpit-lab-client"),
            (self.guest_keys / "ssh_host_ed25519_key", f"{self.name}-host"),
        ):
            if not key.exists():
                subprocess.run(
                    ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)],
                    check=True,
                    capture_output=True,
                )
        shutil.copy(self.client_key.with_suffix(".pub"), self.guest_keys / "authorized_keys")
        os.chmod(self.guest_keys, 0o755)
        os.chmod(self.guest_keys / "authorized_keys", 0o644)

    def _free_index(self) -> int:
        used = set()
        for other in run_root().glob("*/index"):
            if other.parent.name == self.name:
                continue
            try:
                used.add(int(other.read_text()))
            except (OSError, ValueError):
                continue
        for i in range(MAX_LABS):
            if i not in used:
                return i
        raise CockpitError(f"{MAX_LABS} labs are up already: take one down first")

    def _launch(self, rootfs: Path, source: Path | None, chosen: image.Release, net: network.LabNet) -> int:
        cgroups = _cgroup_dirs(self.name)
        for cg in cgroups:
            # An earlier run's `payload` left in the unified hierarchy alone made nspawn skip its
            # compat twin and die ("Failed to chown() cgroup ...payload"): start from none.
            if not _remove_cgroup(cg, timeout=5):
                raise CockpitError(
                    f"the lab {self.name} cannot boot: its cgroup {cg} still holds processes of an earlier "
                    f"run ({', '.join(map(str, sorted(_pids_in(cg)))) or 'exited, not yet reaped'}); "
                    f"run `{cockpit_command()} lab down --name {self.name}` and try again"
                )
            cg.mkdir()
        shown = [] if source is None else [source / "sglang", *sorted(source.glob("sglang-*.dist-info"))]
        self.units_dir.mkdir(parents=True, exist_ok=True)
        binds = [
            (self.guest_keys, "/etc/ssh/lab"),
            (self.units_dir, "/opt/cockpit-lab/units"),
            (GUEST_DIR, "/opt/cockpit-lab/guest"),
            (Path(cockpit.__file__).parent, "/opt/cockpit/cockpit"),
            *((d, f"{chosen.site_packages}/{d.name}") for d in shown),
        ]
        nspawn = [
            "systemd-nspawn",
            "--boot",
            "--register=no",
            "--keep-unit",
            "--quiet",
            "-D",
            str(rootfs),
            f"--machine={self.name}",
            "--volatile=overlay",
            f"--network-namespace-path={net.netns_path}",
            "--resolv-conf=off",
            "--timezone=off",
            "--link-journal=no",
            "--console=pipe",
            *(f"--bind-ro={src}:{dst}" for src, dst in binds),
        ]
        # nspawn wants its own mount namespace with a private /run/systemd/nspawn when the jump
        # box's PID 1 is not systemd; `exec` keeps one PID from here to nspawn.
        script = 'mkdir -p /run/systemd/nspawn && mount -t tmpfs tmpfs /run/systemd/nspawn && exec "$@"'
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *nspawn]
        env = dict(os.environ, SYSTEMD_NSPAWN_LOCK="0")

        def join_cgroups() -> None:
            for cg in cgroups:
                (cg / "cgroup.procs").write_text(f"{os.getpid()}\n")

        with open(self.run_dir / "console.log", "wb") as console:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=join_cgroups,
            )
        (self.run_dir / "pid").write_text(f"{proc.pid}\n")
        return proc.pid

    def _write_ssh_files(self, info: LabInfo) -> None:
        host_key = (self.guest_keys / "ssh_host_ed25519_key.pub").read_text().split()
        self.known_hosts.write_text(f"{info.address} {host_key[0]} {host_key[1]}\n")
        blocks = []
        for alias, user in ((self.name, "root"), (f"{self.name}-operator", "operator")):
            blocks.append(
                f"Host {alias}\n"
                f"  HostName {info.address}\n"
                f"  User {user}\n"
                f"  IdentityFile {self.client_key}\n"
                f"  IdentitiesOnly yes\n"
                f"  UserKnownHostsFile {self.known_hosts}\n"
                f"  StrictHostKeyChecking yes\n"
                f"  ServerAliveInterval 2\n"
                f"  ServerAliveCountMax 3\n"
            )
        self.ssh_config.write_text(f"# written by `cockpit lab up` for the lab {self.name}\n" + "\n".join(blocks))

    def _console_tail(self) -> str:
        try:
            lines = (self.run_dir / "console.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no console output"
        return " | ".join(lines[-3:]) or "no console output"

    # -- down -----------------------------------------------------------------------------

    def _stop_leftovers(self) -> None:
        """A lab that died without `down` leaves its namespace and cgroup: clear them first."""
        if self.run_dir.exists() and self.info() is None:
            self.down(keep_state=True)

    def down(self, timeout: float = 10.0, keep_state: bool = False) -> bool:
        """Stop the lab and remove what it left in /run and /var/lib (its keys, ssh_config and
        units dir; `keep_state` keeps them, as a reboot keeps a host's disk and host key); True
        when something was running. Safe to call when it is not."""
        _require_root()
        stopped = False
        pid = None
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.run_dir / "pid").read_text())
        if pid is not None and _is_lab_process(pid, self.name):
            stopped = True
            os.kill(pid, signal.SIGTERM)  # nspawn powers the container off cleanly
            deadline = time.monotonic() + timeout
            while _is_lab_process(pid, self.name) and time.monotonic() < deadline:
                time.sleep(0.05)
        cgroups = _cgroup_dirs(self.name)
        for cg in cgroups:
            for leftover in _pids_in(cg):  # only processes started inside this lab's cgroup
                with contextlib.suppress(ProcessLookupError):
                    os.kill(leftover, signal.SIGKILL)
        if pid is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        try:
            index = int((self.run_dir / "index").read_text())
        except (OSError, ValueError):
            index = None
        if index is not None:
            network.remove(network.LabNet(self.name, index))
        deadline = time.monotonic() + 5
        for cg in cgroups:
            while _pids_in(cg) and time.monotonic() < deadline:
                time.sleep(0.05)
            _remove_cgroup(cg, timeout=max(0.0, deadline - time.monotonic()))
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.ssh_config.unlink(missing_ok=True)
        if not keep_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        return stopped

    # -- ssh ------------------------------------------------------------------------------

    def ssh_argv(self, user: str = "root", command: list[str] | None = None, shell: bool = False) -> list[str]:
        """OpenSSH's argv for `command`: an argv quoted once for the remote shell (it runs
        exactly those words), or, with `shell`, one string the remote shell reads as a command."""
        if self.info() is None:
            raise CockpitError(f"the lab {self.name} is not up: run `{cockpit_command()} lab up --name {self.name}`")
        alias = self.name if user == "root" else f"{self.name}-{user}"
        words = ([" ".join(command)] if shell else [shlex.join(command)]) if command else []
        return ["ssh", "-F", str(self.ssh_config), alias, *words]

    def net(self) -> network.LabNet:
        info = self.info()
        if info is None:
            raise CockpitError(f"the lab {self.name} is not up")
        return network.LabNet(self.name, info.index)


DEMO_CONFIG = Path(__file__).with_name("demo.toml")


def demo_config(name: str = DEFAULT_NAME) -> Config:
    """The config `make demo` opens: the lab's sglang-demo.service and a short load profile,
    for the lab of that name (the shipped file names the default lab)."""
    return parse_config(DEMO_CONFIG.read_text().replace(DEFAULT_NAME, name), DEMO_CONFIG)


POST_SCRIPT = """
import sys, urllib.request
port, path, body = sys.argv[1], sys.argv[2], sys.argv[3].encode()
request = urllib.request.Request(
    f"http://127.0.0.1:{port}{path}", data=body, method="POST", headers={"Content-Type": "application/json"}
)
print(urllib.request.urlopen(request, timeout=60).read().decode())
"""
FAULTS = ("crash", "hang", "kill-detokenizer", "flood")  # the stand-in's POST /standin/<fault>
# The real-SGLang image's own servers (guest/real-sglang/), installed at boot and left stopped:
# each start takes gigabytes and both cores for half a minute. Unit -> the port it serves on.
REAL_UNITS = {"sglang-real-tp1.service": 30010, "sglang-real-tp2.service": 30020}


def post(lab: Lab, port: int, path: str, body: dict[str, object], what: str) -> dict[str, object]:
    """POST `body` as JSON to a server of the lab on its loopback (where units listen, out of the
    jump box's reach) and what it answered; `what` names the server in the one-sentence error."""
    argv = ["python3", "-c", POST_SCRIPT, str(port), path, json.dumps(body)]
    proc = subprocess.run(lab.ssh_argv("root", argv), capture_output=True, text=True, timeout=90)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no answer"])[-1]
        raise CockpitError(f"{what} on {lab.name} (port {port}) did not answer {path}: {last}")
    answer = json.loads(proc.stdout)
    return answer if isinstance(answer, dict) else {}


def fault(lab: Lab, what: str, port: int = 30000, **params: object) -> dict[str, object]:
    """Ask the lab's stand-in for one of its FAULTS (`POST /standin/<what>`, `params` as its JSON
    body: `flood` takes `lines`); what it answered."""
    return post(lab, port, f"/standin/{what}", params, f"the stand-in (asked for a {what})")


def generate(
    lab: Lab, text: str, port: int = REAL_UNITS["sglang-real-tp1.service"], tokens: int = 8
) -> dict[str, object]:
    """SGLang's native `/generate` on a real server of the lab: `tokens` new tokens, greedy; its answer
    (`text`, `output_ids`, `meta_info`)."""
    body: dict[str, object] = {"text": text, "sampling_params": {"max_new_tokens": tokens, "temperature": 0}}
    return post(lab, port, "/generate", body, "SGLang")


def crash(lab: Lab, port: int = 30000) -> int:
    """Make every rank of the lab's stand-in crash at once; the number of ranks that will print
    a traceback."""
    return int(str(fault(lab, "crash", port).get("ranks", 0)))


def running_labs() -> list[LabInfo]:
    out = []
    for d in sorted(run_root().glob("*/lab.json")):
        try:
            info = Lab(d.parent.name).info()
        except UsageError:
            continue
        if info is not None:
            out.append(info)
    return out
