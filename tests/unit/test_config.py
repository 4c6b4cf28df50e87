"""Config errors: each kind of mistake names the file, the line and the key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cockpit import config
from cockpit.config import reader
from cockpit.errors import UsageError
from tests.conftest import ROOT

GOOD = """\
[hosts.gpu1]
ssh = "gpu1"
sudo = true

[hosts.gpu2]
hostname = "10.0.0.12"
user = "ubuntu"
port = 2222
jump = "gpu1"

[units.k26]
host = "gpu1"
unit = "sglang-k26.service"
python = "/opt/sglang/venv/bin/python"
url = "http://127.0.0.1:30000"
profile = "sweep"

[profiles.sweep]
concurrency = [1, 2, 4, 8, 16, 32]
requests = 64
input_len = 1024
output_len = 256

[ui]
theme = "cockpit-light"
keys = { restart = "ctrl+r" }
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "cockpit.toml"
    p.write_text(textwrap.dedent(text))
    return p


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(UsageError) as info:
        config.load(str(write(tmp_path, text)))
    return str(info.value)


def test_good_config_reads_every_section(tmp_path: Path) -> None:
    cfg = config.load(str(write(tmp_path, GOOD)))
    assert cfg.hosts["gpu1"].sudo is True and cfg.hosts["gpu1"].ssh_alias == "gpu1"
    assert cfg.hosts["gpu2"].port == 2222 and cfg.hosts["gpu2"].jump == "gpu1"
    assert cfg.units["k26"].unit == "sglang-k26.service"
    assert cfg.units["k26"].python == "/opt/sglang/venv/bin/python"
    assert cfg.profile("sweep").concurrency == (1, 2, 4, 8, 16, 32)
    assert cfg.ui.theme == "cockpit-light" and cfg.ui.keys == {"restart": "ctrl+r"}


def test_example_config_is_valid_and_documents_every_key() -> None:
    example = ROOT / "config.example.toml"
    cfg = config.load(str(example))
    assert cfg.units and cfg.hosts and cfg.profiles
    text = example.read_text()
    for key in reader._HOST_KEYS + reader._UNIT_KEYS + reader._PROFILE_KEYS + reader._UI_KEYS:
        assert f"# {key}" in text or f"{key} =" in text, f"config.example.toml does not document {key}"


def test_wrong_type_names_file_line_and_key(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace("port = 2222", 'port = "abc"'))
    assert msg.endswith("cockpit.toml:8: hosts.gpu2.port: expected a port number between 1 and 65535, got 'abc'")


def test_unknown_key_has_did_you_mean(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace("sudo = true", "sodu = true"))
    assert msg.endswith("cockpit.toml:3: hosts.gpu1.sodu: unknown key (did you mean 'sudo'?)")


def test_unknown_top_level_table(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD + "\n[unit.x]\nhost = 'gpu1'\n")
    assert "cockpit.toml:28: unit: unknown key (did you mean 'units'?)" in msg


def test_syntax_error_names_line(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace('theme = "cockpit-light"', 'theme = "cockpit-light'))
    assert "cockpit.toml:25: not valid TOML" in msg


def test_unit_on_unknown_host(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace('host = "gpu1"\nunit', 'host = "gpu3"\nunit'))
    assert msg.endswith("cockpit.toml:12: units.k26.host: unknown host 'gpu3' (did you mean 'gpu1'?)")


def test_unit_missing_host(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace('host = "gpu1"\nunit', "unit"))
    assert msg.endswith("cockpit.toml:11: units.k26: missing key 'host' (the [hosts] entry this unit runs on)")


def test_bad_url(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace('url = "http://127.0.0.1:30000"', 'url = "127.0.0.1:30000"'))
    assert msg.endswith("cockpit.toml:15: units.k26.url: expected an http:// or https:// URL, got '127.0.0.1:30000'")


def test_relative_python(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace('"/opt/sglang/venv/bin/python"', '"python3"'))
    assert msg.endswith("cockpit.toml:14: units.k26.python: expected an absolute path on the host, got 'python3'")


def test_bad_unit_name_with_shell_characters(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace('"sglang-k26.service"', '"sglang k26; rm -rf /"'))
    assert "cockpit.toml:13: units.k26.unit: expected a systemd unit name" in msg


def test_unknown_profile(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace('profile = "sweep"', 'profile = "sweeep"'))
    assert msg.endswith("cockpit.toml:16: units.k26.profile: unknown profile 'sweeep' (did you mean 'sweep'?)")


def test_bad_concurrency_in_multiline_array(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace("concurrency = [1, 2, 4, 8, 16, 32]", "concurrency = [\n  1,\n  0,\n]"))
    assert msg.endswith(
        "cockpit.toml:19: profiles.sweep.concurrency: expected a non-empty array of positive integers, got an array"
    )


def test_key_inside_inline_table(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace('keys = { restart = "ctrl+r" }', "keys = { restart = 5 }"))
    assert "cockpit.toml:26: ui.keys.restart: expected keys such as" in msg


def test_both_alias_and_hostname(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace('ssh = "gpu1"', 'ssh = "gpu1"\nhostname = "10.0.0.1"'))
    assert msg.endswith(
        "cockpit.toml:3: hosts.gpu1.hostname: give either 'ssh' (an ssh_config alias) or 'hostname', not both"
    )


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="config file not found"):
        config.load(str(tmp_path / "nope.toml"))
    bad = tmp_path / "bin.toml"
    bad.write_bytes(b"[hosts]\n\xff\xfe")
    with pytest.raises(UsageError, match="not UTF-8"):
        config.load(str(bad))


def test_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_file = write(tmp_path, GOOD)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COCKPIT_CONFIG", str(env_file))
    assert config.find_config_path("explicit.toml") == Path("explicit.toml")
    assert config.find_config_path() == env_file
    monkeypatch.delenv("COCKPIT_CONFIG")
    assert config.find_config_path() == Path("cockpit.toml")  # ./cockpit.toml, no user config
    user = tmp_path / "home" / ".config" / "cockpit" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("")
    assert config.find_config_path() == user


def test_unknown_host_name_falls_back_to_ssh_alias() -> None:
    cfg = config.Config()
    assert cfg.host("cockpit-lab").ssh_alias == "cockpit-lab"


def test_every_mistake_is_said_at_once(tmp_path: Path) -> None:
    """They came one at a time: fix, run, the next one. A unit of a broken host is not said
    again as an unknown host."""
    text = GOOD.replace("sudo = true", "sodu = true").replace("port = 2222", 'port = "abc"')
    text = text.replace("requests = 64", "requests = -1")
    msg = error_of(tmp_path, text)
    lines = msg.splitlines()
    assert lines[0] == "3 problems in the config:", msg
    assert lines[1].endswith("cockpit.toml:3: hosts.gpu1.sodu: unknown key (did you mean 'sudo'?)")
    assert lines[2].endswith("cockpit.toml:8: hosts.gpu2.port: expected a port number between 1 and 65535, got 'abc'")
    assert "profiles.sweep.requests" in lines[3] and "unknown host" not in msg
