"""The unit-file model against the lab's real systemd (252).

Every unit here runs `/opt/sglang/venv/bin/python -m sglang.launch_server ...` with a stand-in
`sglang.launch_server` first on PYTHONPATH that writes the argv it got (from /proc/self/cmdline)
and its environment to `/run/unit-test/%n.json` and exits. For each unit the test checks, in one
round trip per batch:

- `systemd-analyze verify` accepts it;
- the argv systemd stored (`busctl` ExecStart, exact; `systemctl show -p ExecStart`, space-joined)
  is the model's argv before `$`-expansion;
- the argv and environment the process got are the model's `exec()` and `environment()`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cockpit.systemd.unit import Unit, load_unit
from tests.conftest import LabHandle
from tests.unit.test_unit_file import DATA, ENV_CONF, ETC, FRAGMENT, OVERRIDE, VALUES, cli, eagle_texts

pytestmark = pytest.mark.lab

STANDIN = """\
import json, os
with open("/proc/self/cmdline", "rb") as f:
    argv = [a.decode("utf-8", "surrogateescape") for a in f.read().split(b"\\0")[:-1]]
with open(os.environ["DUMP_TO"], "w") as out:
    json.dump({"argv": argv, "env": dict(os.environ)}, out)
"""
LAB_DROPIN = "[Service]\nEnvironment=PYTHONPATH=/opt/unit-test DUMP_TO=/run/unit-test/%n.json\n"

# Runs in the lab: write the files, reload, verify, read what systemd stored, start, collect.
ROUND_TRIP = r"""
import json, os, shutil, subprocess, sys, time
req = json.load(sys.stdin)
for path in req["remove"]:
    shutil.rmtree(path, ignore_errors=True)
for path, text in req["files"].items():
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
subprocess.run(["systemctl", "daemon-reload"], check=True)
units = req["units"]
verify = subprocess.run(["systemd-analyze", "verify", *units], capture_output=True, text=True)
out = {"verify": [verify.returncode, verify.stderr], "units": {}}
for unit in units:
    bus = "/org/freedesktop/systemd1/unit/" + "".join(
        c if c.isascii() and c.isalnum() else "_%02x" % ord(c) for c in unit
    )
    prop = subprocess.run(["busctl", "--json=short", "get-property", "org.freedesktop.systemd1", bus,
                           "org.freedesktop.systemd1.Service", "ExecStart"], capture_output=True, text=True, check=True)
    show = subprocess.run(["systemctl", "show", "-p", "ExecStart", "--value", unit], capture_output=True)
    out["units"][unit] = {"stored": json.loads(prop.stdout)["data"], "show": show.stdout.decode()}
os.makedirs("/run/unit-test", exist_ok=True)
for name in os.listdir("/run/unit-test"):
    os.unlink(os.path.join("/run/unit-test", name))
subprocess.run(["systemctl", "reset-failed"], check=False)
subprocess.run(["systemctl", "start", *units], check=True)
deadline = time.monotonic() + 30
while time.monotonic() < deadline and not all(os.path.exists(f"/run/unit-test/{u}.json") for u in units):
    time.sleep(0.05)
for unit in units:
    path = f"/run/unit-test/{unit}.json"
    out["units"][unit]["ran"] = json.load(open(path)) if os.path.exists(path) else None
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def lab_units(lab: LabHandle) -> LabHandle:
    """The lab with the argv-dumping stand-in for `sglang.launch_server` installed."""
    lab.ssh(
        "sh",
        "-c",
        "mkdir -p /opt/unit-test/sglang && : > /opt/unit-test/sglang/__init__.py && "
        "cat > /opt/unit-test/sglang/launch_server.py",
        input=STANDIN,
    )
    return lab


def round_trip(lab: LabHandle, units: list[Unit], remove: list[str] = ()) -> dict:
    """Install every file of `units` in the lab and bring back what systemd made of them."""
    files: dict[str, str] = {}
    for unit in units:
        files.update(unit.texts)
        files.update({f.path: f.render() for f in unit.files})
    request = {"files": files, "units": [u.name for u in units], "remove": list(remove)}
    proc = lab.ssh("python3", "-c", ROUND_TRIP, input=json.dumps(request), timeout=120)
    result = json.loads(proc.stdout)
    assert result["verify"][0] == 0, result["verify"][1]
    for unit in units:
        got = result["units"][unit.name]
        [(path, stored, *_)] = got["stored"]
        [(_, command)] = unit.exec_start()
        assert (path, stored) == (command.words[0].value, command.argv)
        assert got["show"].startswith(f"{{ path={path} ; argv[]={' '.join(stored)} ; ")
        assert got["ran"] is not None, f"{unit.name} did not run"
        assert got["ran"]["argv"] == unit.exec()
        assert {k: got["ran"]["env"].get(k) for k in unit.environment()} == unit.environment()
    return result


@pytest.mark.parametrize("override", [False, True], ids=["unit-file", "override"])
def test_the_hand_written_unit_runs_what_show_lists(lab_units: LabHandle, override: bool) -> None:
    texts = eagle_texts(override) | {f"{ETC}/sglang-eagle.service.d/zz-lab.conf": LAB_DROPIN}
    unit = load_unit(texts, FRAGMENT)
    assert unit.defined_in == (OVERRIDE if override else FRAGMENT)
    round_trip(lab_units, [unit], remove=[f"{ETC}/sglang-eagle.service.d"])
    edited = unit.set_flag("--tp-size" if not override else "--tp", "2").set_env("SGLANG_WELCOME", "100% $ready")
    assert set(edited.changed()) == {unit.defined_in, ENV_CONF}
    round_trip(lab_units, [edited])


def test_cockpit_unit_set_output_passes_verify_and_runs(lab_units: LabHandle, tmp_path: Path, capsys) -> None:
    (tmp_path / "sglang-eagle.service.d").mkdir()
    (tmp_path / "sglang-eagle.service").write_text((DATA / "sglang-eagle.service").read_text())
    (tmp_path / "sglang-eagle.service.d" / "10-env.conf").write_text(eagle_texts()[ENV_CONF])
    value = 'a "quoted" 100% $HOME\nline\\two'
    assert (
        cli(
            "set",
            str(tmp_path / "sglang-eagle.service"),
            "--flag",
            f"served-model-name={value}",
            "--unset",
            "api-key",
            "--flag",
            "enable-torch-compile",
        )
        == 0
    )
    printed = capsys.readouterr().out
    texts = eagle_texts() | {FRAGMENT: printed, f"{ETC}/sglang-eagle.service.d/zz-lab.conf": LAB_DROPIN}
    unit = load_unit(texts, FRAGMENT)
    result = round_trip(lab_units, [unit], remove=[f"{ETC}/sglang-eagle.service.d"])
    argv = result["units"]["sglang-eagle.service"]["ran"]["argv"]
    assert argv[argv.index("--served-model-name") + 1] == value
    assert "--api-key" not in argv and argv[-1] == "--enable-torch-compile"


BASE = (
    "[Unit]\nDescription=cockpit unit-file round trip\n\n[Service]\nType=simple\n"
    'Environment=PYTHONPATH=/opt/unit-test "DUMP_TO=/run/unit-test/%n.json"\n'
    "ExecStart=/opt/sglang/venv/bin/python -m sglang.launch_server \\\n"
    "    --model-path /models/x \\\n    --port 30000\n"
)
NASTY = [
    "",
    " ",
    "a b",
    "'",
    '"',
    "\\",
    "\\\\n",
    "%",
    "%%",
    "%i",
    "%n",
    "$",
    "$$",
    "$HOME",
    "${HOME}",
    "$HOME x",
    ";",
    "\\;",
    "--tp-size",
    "-1",
    "a\nb",
    "\t",
    "\r",
    "\x01",
    "\x7f",
    "\x85",
    "\u2028",
    "é",
    "日本",
    '{"a": [1, 2]}',
    "#",
    " # x",
    "=",
    "x=y",
    "\ufeff",
]


@settings(max_examples=6, deadline=None)
@given(values=st.lists(VALUES, min_size=1, max_size=12))
@example(values=NASTY)
def test_any_value_reads_back_through_systemd(lab_units: LabHandle, values: list[str]) -> None:
    units = []
    for i, value in enumerate(values):
        path = f"{ETC}/x-test-{i}.service"
        unit = load_unit({path: BASE}, path).set_flag("--port", value).set_flag("--served-model-name", value)
        units.append(unit.set_env("SGLANG_VALUE", value))
    result = round_trip(lab_units, units)
    for unit, value in zip(units, values, strict=True):
        ran = result["units"][unit.name]["ran"]
        assert ran["env"]["SGLANG_VALUE"] == value
        assert ran["argv"][3:5] == ["--model-path", "/models/x"] and len(ran["argv"]) in (7, 8, 9)
        assert flag_value(ran["argv"][5:], "--port") == flag_value(ran["argv"][5:], "--served-model-name") == value


def flag_value(argv: list[str], name: str) -> str | None:
    """What argparse would give `name`: the next word, or what follows `name=`."""
    for i, word in enumerate(argv):
        if word == name:
            return argv[i + 1]
        if word.startswith(name + "="):
            return word[len(name) + 1 :]
    return None


def test_command_words_and_environment_files_read_like_systemd(lab_units: LabHandle) -> None:
    """The quirky cases of the offline tests, run for real instead of trusted."""
    env_text = "A=1\nB='x y'z\nC=\"q \\$ \\n\" w\nexport D=4\nE = 5  \nF=a\\\nb\n# G=no\\\nH=swallowed\nI=\n"
    text = (
        BASE.replace("    --port 30000\n", "    --port 30000 \\\n")
        + r"""    a"b c"d 'x\ty' \x41\101\u00e9 $SP ${SP} pre${SP}post $$SP $$ $ $SP/x x$A 50% %n %%b \; """
        + r"""${A:-z} ${A} $B $C $E $F $NL \q "a\qb" "" x""y %N %p %i %j"""
        + "\n"
        + "Environment=\"SP=a b  'c d'\" NL=a\\nb\nEnvironmentFile=/etc/unit-test/quirks.env\n"
    )
    path = f"{ETC}/x-words-a-b.service"
    unit = load_unit({path: text, "/etc/unit-test/quirks.env": env_text}, path)
    assert unit.environment()["C"] == "q $ \\nw" and "D" not in unit.environment()
    assert unit.exec()[-4:] == ["x-words-a-b", "x-words-a-b", "", "b"]
    round_trip(lab_units, [unit])
