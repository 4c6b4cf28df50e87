"""The unit-file model offline: lossless parsing, systemd's command-line rules, drop-ins, edits
that change only what they change, property tests, and `cockpit unit show|set`.

The expected argv of the tricky cases below are what systemd 252 produced in the lab for the
same lines (`busctl` for the stored argv, /proc/self/cmdline for what the process got);
tests/lab/test_unit_file_lab.py checks the model against the lab's systemd directly.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.cli import unit as unit_cli
from cockpit.sglang.catalog.flags import Catalog, Flag
from cockpit.systemd.unit import UnitError, load_unit, read_local
from cockpit.systemd.unit_env import parse_env_file
from cockpit.systemd.unit_exec import ExecSyntaxError, check_representable, expand_env, parse_commands, quote_word
from cockpit.systemd.unit_paths import dropin_dirs, select_dropins
from cockpit.systemd.unit_syntax import UnitSyntaxError, parse_unit_file, split_lines
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "units"
ETC = "/etc/systemd/system"
FRAGMENT = f"{ETC}/sglang-eagle.service"
ENV_CONF = f"{ETC}/sglang-eagle.service.d/10-env.conf"
OVERRIDE = f"{ETC}/sglang-eagle.service.d/override.conf"
ENV_FILE = "/etc/sglang/eagle.env"


def eagle_texts(override: bool = False) -> dict[str, str]:
    """The hand-written unit as it lies on a host, with or without `systemctl edit`'s override."""
    texts = {
        FRAGMENT: (DATA / "sglang-eagle.service").read_text(),
        ENV_CONF: (DATA / "sglang-eagle.service.d" / "10-env.conf").read_text(),
        ENV_FILE: (DATA / "eagle.env").read_text(),
    }
    if override:
        texts[OVERRIDE] = (DATA / "sglang-eagle.service.d" / "override.conf").read_text()
    return texts


def one_command(execstart: str, env: dict[str, str] | None = None, name: str = "x-exp.service") -> list[str]:
    from cockpit.systemd.unit_exec import name_specifiers

    [command] = parse_commands(execstart, name_specifiers(name))
    return [a.value for a in expand_env(command, env or {})[0]]


# --- lossless parsing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "[Service]\r\nExecStart=/bin/a \\\r\n  --x 1\r\n",
        "\ufeff# bom\n[Service]\nType=simple",  # a byte-order mark and no final newline
        "[Service]\n  ExecStart = /bin/a \\\n# inside\n; inside too\n    --b \\\n\n\n[Install]\nWantedBy=x\n",
        "[Service]\nExecStart=/bin/a \\",  # a continuation that runs into the end of the file
        "\n\n   \n# only comments\n",
        "[Service]\rA=1\n\rB=2\r\n",  # old Mac endings and systemd's \n\r pair
    ],
)
def test_render_of_an_unchanged_file_is_the_file(text: str) -> None:
    assert parse_unit_file("u.service", text).render() == text


def test_logical_lines_follow_systemds_conf_parser() -> None:
    f = parse_unit_file(
        "u.service", "[Service]\n  ExecStart = /bin/a \\\n# inside\n; also\n    --b 'c \\\n d' \\\n\nX=1\n"
    )
    [(_, entry)] = f.directives("Service", "ExecStart")
    assert entry.value == "/bin/a      --b 'c   d'"
    assert entry.lineno == 2 and len(entry.lines) == 6  # the comments and the blank line that ends it
    assert [e.kind for e in f.entries] == ["section", "directive", "directive"]
    assert f.directives("Service", "X")[0][1].value == "1"
    assert parse_unit_file("u", "[S]\nA=x \\\\\nB=y\n").directives("S", "A")[0][1].value == "x \\\\"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[Service\nA=1\n", "u.service:1: invalid section header '[Service'"),
        ("A=1\n", "u.service:1: 'A=1' comes before any [Section] header"),
        (
            "[Service]\n\nExecStart /bin/true\n",
            "u.service:3: expected KEY=VALUE, a [Section] header or a comment, got 'ExecStart /bin/true'",
        ),
        ("[Service]\n=1\n", "u.service:2: missing key name before '=' in '=1'"),
    ],
)
def test_malformed_lines_name_file_and_line(text: str, message: str) -> None:
    with pytest.raises(UnitSyntaxError) as e:
        parse_unit_file("u.service", text)
    assert str(e.value) == message


# --- command lines -------------------------------------------------------------------------


def test_command_line_words_as_systemd_252_reads_them() -> None:
    env = {"SP": "a b  'c d'", "A": "1", "NL": "a\nb"}
    argv = one_command(
        r"""/usr/bin/python3 /tmp/dump.py a"b c"d 'x\ty' \x41\101\u00e9 """
        r"""$SP ${SP} pre${SP}post $$SP $$ $ $SP/x x$A 50% %n %%b \; last ${A:-z} ${A} $NL \q "a\qb" "" x""y""",
        env,
    )
    assert argv == [
        "/usr/bin/python3",
        "/tmp/dump.py",
        "ab cd",
        "x\ty",
        "AAé",
        "a",
        "b",
        "c d",
        "a b  'c d'",
        "prea b  'c d'post",
        "$SP",
        "$",
        "x$A",
        "50%",
        "x-exp.service",
        "%b",
        ";",
        "last",
        "${A:-z}",
        "1",
        "a",
        "b",
        "\\q",
        "a\\qb",
        "",
        "xy",
    ]


def test_prefixes_argv0_and_no_expansion() -> None:
    [command] = parse_commands(":-@/usr/bin/python3 py $$HOME", {})
    assert command.prefix == ":-@" and command.words[0].value == "/usr/bin/python3"
    assert command.argv == ["py", "$$HOME"]
    assert [a.value for a in expand_env(command, {"HOME": "/root"})[0]] == ["py", "$$HOME"]  # `:` keeps `$`
    [bang] = parse_commands("!!/bin/true", {})
    assert bang.prefix == "!!"
    assert [c.argv for c in parse_commands("/bin/a 1 ; /bin/b ';' \\;", {})] == [["/bin/a", "1"], ["/bin/b", ";", ";"]]


def test_specifiers_and_variables_only_the_host_knows_are_kept_and_reported() -> None:
    [command] = parse_commands("/bin/a %b %H-%i %%i ${MAINPID} $USER", {"i": "inst"})
    assert [w.specifiers for w in command.words[1:4]] == [("%b",), ("%H",), ()]
    args, missing = expand_env(command, {})
    assert [a.value for a in args][1:] == ["%b", "%H-inst", "%i", "${MAINPID}", "$USER"]
    assert missing == {"MAINPID", "USER"}


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ('/bin/a "unbalanced', "unbalanced quoting"),
        ("/bin/a %z", "unknown specifier %z"),
        ("-", "no program after the prefix '-'"),
        ("bin/a x", "neither an absolute path nor a plain name"),
    ],
)
def test_command_lines_systemd_refuses(line: str, error: str) -> None:
    with pytest.raises(ExecSyntaxError, match=error):
        parse_commands(line, {})


def test_environment_files_are_read_like_systemd_252() -> None:
    text = "A=1\nB='x y'z\nC=\"q \\$ \\n\" w\nexport D=4\nE = 5  \nF=a\\\nb\n# G=no\\\nH=swallowed\nI=\n"
    assert parse_env_file(text) == {"A": "1", "B": "x yz", "C": "q $ \\nw", "E": "5", "F": "ab", "I": ""}


# --- the hand-written unit, its drop-ins and its environment -------------------------------


def test_show_lists_what_systemd_runs() -> None:
    unit = load_unit(eagle_texts(), FRAGMENT)
    d = unit.describe()
    assert d["unit"] == d["defined_in"] == FRAGMENT
    # the argv the lab's systemd started the process with, for the same files
    assert d["exec"] == [
        "/opt/sglang/venv/bin/python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/Llama-3.1-8B-Instruct",
        "--served-model-name",
        "sglang-eagle-eagle",
        "--tp-size",
        "8",
        "--mem-fraction-static=0.80",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "/models/EAGLE3-LLaMA3.1-Instruct-8B",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "4",
        "--speculative-num-draft-tokens",
        "16",
        "--json-model-override-args",
        '{"rope_scaling": {"factor": 8.0}}',
        "--chat-template",
        "/etc/sglang/templates/100%.jinja",
        "--api-key",
        "$ecret\tkey",
        "--trust-remote-code",
        "--enable-metrics",
        "--context-length",
        "8192",
        "--host",
        "0.0.0.0",
        "--port",
        "30000",
    ]
    flags = {f["name"]: f["value"] for f in d["flags"]}
    assert flags["--mem-fraction-static"] == "0.80" and flags["--trust-remote-code"] is None
    assert flags["--enable-metrics"] is None and flags["--context-length"] == "8192"  # from $EXTRA_ARGS
    assert "--disable-cuda-graph" not in flags and len(d["flags"]) == 17
    assert d["environment"]["SGLANG_LOG_PREFIX"] == "[sglang-eagle.service] 100% ready"
    assert d["environment"]["SGLANG_QUOTE"] == "it's" and d["environment"]["DRAFT_DIR"].endswith("-8B")
    assert d["environment_files"] == [ENV_FILE, "-/etc/sglang/local.env"]
    assert d["unresolved"] == ["/etc/sglang/local.env"]


def test_an_override_that_resets_execstart_defines_the_command() -> None:
    unit = load_unit(eagle_texts(override=True), FRAGMENT)
    assert unit.defined_in == OVERRIDE
    assert unit.exec()[3:] == [
        "--model-path",
        "/models/Llama-3.1-8B-Instruct",
        "--tp",
        "4",
        "--trust-remote-code",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "/models/EAGLE3-LLaMA3.1-Instruct-8B",
        "--port",
        "30001",
    ]
    edited = unit.set_flag("tp", "8")
    assert set(edited.changed()) == {OVERRIDE}
    assert edited.render(OVERRIDE) == eagle_texts(override=True)[OVERRIDE].replace("--tp 4", "--tp 8")


def test_dropins_are_found_and_ordered_the_way_systemd_does() -> None:
    dirs = dropin_dirs("sglang-eagle@a.service")
    assert (
        dirs.index(f"{ETC}/sglang-eagle@a.service.d")
        < dirs.index(f"{ETC}/sglang-eagle@.service.d")
        < dirs.index(f"{ETC}/sglang-@a.service.d")
        < dirs.index("/usr/lib/systemd/system/sglang-eagle@a.service.d")
        < dirs.index(f"{ETC}/service.d")
    )
    found = select_dropins(
        "sglang-eagle.service",
        [
            "/usr/lib/systemd/system/sglang-eagle.service.d/10-env.conf",  # masked by /etc's file of the same name
            f"{ETC}/sglang-eagle.service.d/10-env.conf",
            "/run/systemd/system/sglang-.service.d/05-first.conf",
            f"{ETC}/sglang-eagle.service.d/notes.txt",
            f"{ETC}/service.d/99-all.conf",
            f"{ETC}/other.service.d/00.conf",
        ],
    )
    assert found == [
        "/run/systemd/system/sglang-.service.d/05-first.conf",
        f"{ETC}/sglang-eagle.service.d/10-env.conf",
        f"{ETC}/service.d/99-all.conf",
    ]


def test_a_variable_nobody_knows_is_never_taken_for_a_value() -> None:
    texts = eagle_texts()
    del texts[ENV_FILE]  # not read from the host: $EXTRA_ARGS may be any number of words
    items = [(i.name, i.value) for i in load_unit(texts, FRAGMENT).items()]
    assert items[12:15] == [("--trust-remote-code", None), (None, "$EXTRA_ARGS"), ("--host", "0.0.0.0")]
    assert load_unit(texts, FRAGMENT).unresolved() == ["$DRAFT_DIR", "$EXTRA_ARGS", ENV_FILE, "/etc/sglang/local.env"]


def test_a_later_dropin_can_reset_the_environment() -> None:
    texts = {
        f"{ETC}/a.service": "[Service]\nEnvironment=A=1 B=2\nExecStart=/bin/a ${A}${B}\n",
        f"{ETC}/a.service.d/x.conf": "[Service]\nEnvironment=\nEnvironment=B=3\n",
    }
    unit = load_unit(texts, f"{ETC}/a.service")
    assert unit.environment() == {"B": "3"}
    assert unit.exec() == ["/bin/a", "${A}3"] and unit.unresolved() == ["$A"]


# --- edits ---------------------------------------------------------------------------------


def _split(text: str, start: str, end: str) -> tuple[str, str, str]:
    i = text.index(start)
    j = text.index(end, i) + len(end)
    return text[:i], text[i:j], text[j:]


def test_set_flag_changes_the_flags_words_and_no_other_byte() -> None:
    """Issue 26: the README promises every other byte kept, the wrapping of the continuation
    lines too (the edit used to re-wrap the command one flag per line)."""
    original = eagle_texts()[FRAGMENT]
    unit = load_unit(eagle_texts(), FRAGMENT)
    assert unit.set_flag("--tp-size", "4").render() == original.replace("--tp-size 8", "--tp-size 4")
    assert unit.set_flag("--speculative-eagle-topk", "1").render() == original.replace("topk 4", "topk 1")
    # a flag alone on its continuation line goes with its line; one that shares it, with its blank
    assert unit.unset_flag("--trust-remote-code").render() == original.replace("    --trust-remote-code \\\n", "")
    assert unit.unset_flag("--speculative-num-steps").render() == original.replace("--speculative-num-steps 3 ", "")
    assert unit.unset_flag("--port").render() == original.replace(" --port 30000", "")
    # the last line goes: the line above ends the directive now
    assert unit.unset_flag("--host").unset_flag("--port").render() == original.replace(
        "    $EXTRA_ARGS \\\n    --host 0.0.0.0 --port 30000", "    $EXTRA_ARGS"
    )
    # a new flag: on a continuation line of its own, indented like the last one
    assert unit.set_flag("--enable-lora").render() == original.replace(
        "--port 30000\n", "--port 30000 \\\n    --enable-lora\n"
    )


def test_set_an_unchanged_value_changes_nothing_and_unset_removes_every_occurrence() -> None:
    unit = load_unit(eagle_texts(), FRAGMENT)
    assert unit.set_flag("tp-size", "8").changed() == {}
    texts = {"/u/a.service": "[Service]\nExecStart=/bin/a --x 1 --y --x=2\n"}
    a = load_unit(texts, "/u/a.service")
    assert a.set_flag("--x", "3").render() == "[Service]\nExecStart=/bin/a --x 1 --y --x=3\n"
    assert a.unset_flag("x").render() == "[Service]\nExecStart=/bin/a --y\n"
    assert a.set_flag("--z", "4").render() == "[Service]\nExecStart=/bin/a --x 1 --y --x=2 --z 4\n"
    ended = load_unit({"/u/a.service": "[Service]\nExecStart=/bin/a --x 1 -- in.txt\n"}, "/u/a.service")
    assert ended.set_flag("--z", "4").render() == "[Service]\nExecStart=/bin/a --x 1 --z 4 -- in.txt\n"
    with pytest.raises(UnitError, match="has no flag --z"):
        a.unset_flag("--z")


def test_edits_keep_line_endings_prefixes_and_argv0() -> None:
    unit = load_unit({"/u/a.service": "[Service]\r\nExecStart=-@/usr/bin/python3 py -m x --a 1\r\nX=1"}, "/u/a.service")
    edited = unit.set_flag("b", "2").set_env("K", "v")
    assert edited.render() == (
        "[Service]\r\nEnvironment=K=v\r\nExecStart=-@/usr/bin/python3 py -m x --a 1 --b 2\r\nX=1"
    )
    assert edited.exec() == ["py", "-m", "x", "--a", "1", "--b", "2"]


def test_environment_file_texts_can_come_later() -> None:
    texts = eagle_texts()
    env_text = texts.pop(ENV_FILE)
    unit = load_unit(texts, FRAGMENT)
    assert "DRAFT_DIR" not in unit.environment() and ENV_FILE in unit.unresolved()
    later = unit.with_texts({ENV_FILE: env_text.encode(), "/etc/sglang/local.env": b"SGLANG_LOCAL=1\n"})
    assert later.exec() == load_unit(eagle_texts(), FRAGMENT).exec()
    assert later.environment()["SGLANG_LOCAL"] == "1" and later.unresolved() == []


def test_values_are_quoted_so_systemd_reads_them_back() -> None:
    unit = load_unit({"/u/a.service": "[Service]\nExecStart=/bin/a\n"}, "/u/a.service")
    edited = unit.set_flag("--name", 'it\'s "50%" of $HOME\\n\n').set_flag("--neg", "-1").set_flag("--empty", "")
    assert edited.render() == (
        '[Service]\nExecStart=/bin/a --name "it\'s \\"50%%\\" of $$HOME\\\\n\\n" --neg=-1 --empty ""\n'
    )
    assert edited.exec() == ["/bin/a", "--name", 'it\'s "50%" of $HOME\\n\n', "--neg=-1", "--empty", ""]


def test_flags_that_come_from_a_variable_are_not_edited_in_place() -> None:
    unit = load_unit(eagle_texts(), FRAGMENT)
    with pytest.raises(UnitError, match=r"--context-length comes from \$EXTRA_ARGS"):
        unit.set_flag("--context-length", "4096")


def test_a_catalog_decides_switches_values_and_aliases() -> None:
    catalog = Catalog(
        None,
        [
            Flag("--tp-size", "tp_size", option_strings=("--tensor-parallel-size", "--tp-size")),
            Flag("--trust-remote-code", "trust_remote_code", takes_value=False),
            Flag("--lora-paths", "lora_paths", nargs="*"),
        ],
    )
    texts = {
        "/u/a.service": "[Service]\nExecStart=/bin/a --tensor-parallel-size 2 --trust-remote-code extra "
        "--lora-paths a b --x\n"
    }
    with_catalog = load_unit(texts, "/u/a.service", catalog=catalog)
    assert [(i.name, i.value) for i in with_catalog.items()] == [
        ("--tensor-parallel-size", "2"),
        ("--trust-remote-code", None),
        (None, "extra"),
        ("--lora-paths", ("a", "b")),
        ("--x", None),
    ]
    assert with_catalog.set_flag("--tp-size", "8").exec()[1:3] == ["--tensor-parallel-size", "8"]
    heuristic = load_unit(texts, "/u/a.service")
    assert [(i.name, i.value) for i in heuristic.items()][1:4] == [
        ("--trust-remote-code", "extra"),
        ("--lora-paths", "a"),
        (None, "b"),
    ]


def test_environment_edits() -> None:
    unit = load_unit(eagle_texts(), FRAGMENT)
    edited = unit.set_env("SGLANG_WELCOME", "bye 100% $now").set_env("SGLANG_NEW", "a\nb").unset_env("PYTHONUNBUFFERED")
    assert set(edited.changed()) == {FRAGMENT, ENV_CONF}
    assert edited.render(ENV_CONF) == (
        "[Service]\nEnvironment=SGLANG_DISABLE_REQUEST_LOGGING=1\n"
        'Environment="SGLANG_WELCOME=bye 100%% $now" "SGLANG_QUOTE=it\'s"\n'
        'Environment="SGLANG_NEW=a\\nb"\n'
    )
    assert "PYTHONUNBUFFERED" not in edited.render(FRAGMENT)
    assert edited.render(FRAGMENT) == unit.render(FRAGMENT).replace("Environment=PYTHONUNBUFFERED=1\n", "")
    env = edited.environment()
    assert env["SGLANG_WELCOME"] == "bye 100% $now" and env["SGLANG_NEW"] == "a\nb" and "PYTHONUNBUFFERED" not in env
    with pytest.raises(UnitError, match="set in the environment file /etc/sglang/eagle.env"):
        unit.set_env("DRAFT_DIR", "/elsewhere")
    with pytest.raises(UnitError, match="not a valid environment variable name"):
        unit.set_env("1BAD", "x")


# --- properties ----------------------------------------------------------------------------


def _representable(value: str) -> bool:
    try:
        check_representable(value)
    except ValueError:
        return False
    return True


SPECIAL = st.text(st.sampled_from(list(" \t\n\r\"'%$\\;{}=-x#@:!\u00e9\u2028\x7f\x85")), max_size=20)
VALUES = st.one_of(SPECIAL, st.text(max_size=30)).filter(_representable)
BASE = "[Service]\nEnvironment=A=1\nExecStart=/opt/sglang/venv/bin/python -m sglang.launch_server \\\n    --port 1\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=VALUES, existing=st.booleans())
def test_any_value_reads_back_exactly(value: str, existing: bool) -> None:
    name = "--port" if existing else "--served-model-name"
    edited = load_unit({"/u/x.service": BASE}, "/u/x.service").set_flag(name, value)
    reread = load_unit({"/u/x.service": edited.render()}, "/u/x.service")
    assert [(i.name, i.value) for i in reread.flags() if i.name == name] == [(name, value)]
    assert reread.exec()[-2:] == [name, value] or reread.exec()[-1] == f"{name}={value}"
    env = reread.set_env("SGLANG_X", value)
    assert load_unit({"/u/x.service": env.render()}, "/u/x.service").environment()["SGLANG_X"] == value


LINE_ENDS = st.sampled_from(["\n", "\r\n", "\r"])
PIECE = st.text(st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), max_size=15)


@st.composite
def unit_files(draw, eol: str | None = None, bom: bool = True) -> str:
    """Unit files as people write them: comments, blanks, continuations with comments inside."""
    eol = eol or draw(LINE_ENDS)
    lines = [draw(st.sampled_from(["", "\ufeff"] if bom else [""])) + "[Service]"]
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["comment", "blank", "directive", "section"]))
        if kind == "comment":
            lines.append(draw(st.sampled_from(["#", ";", "  #"])) + draw(PIECE))
        elif kind == "blank":
            lines.append(draw(st.sampled_from(["", " ", "\t "])))
        elif kind == "section":
            lines.append(f"[{draw(st.from_regex(r'[A-Za-z]{1,8}', fullmatch=True))}]")
        else:
            key = draw(
                st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,10}", fullmatch=True).filter(
                    lambda k: not k.startswith(("Exec", "Environment"))
                )
            )
            parts = draw(st.lists(PIECE, min_size=1, max_size=4))
            text = f"{draw(st.sampled_from(['', ' ']))}{key}{draw(st.sampled_from(['=', ' = ']))}{parts[0]}"
            for part in parts[1:]:
                lines.append(text + " \\")
                if draw(st.booleans()):
                    lines.append("# " + draw(PIECE))
                text = "    " + part
            lines.append(text)
    return eol.join(lines) + draw(st.sampled_from(["", eol]))


@settings(max_examples=300, deadline=None)
@given(text=unit_files())
def test_generated_unit_files_render_back_byte_for_byte(text: str) -> None:
    assert parse_unit_file("g.service", text).render() == text


@st.composite
def units_around_a_command(draw) -> tuple[str, str, str]:
    """(before, ExecStart directive, after): a command written with quotes, continuations and
    comments inside, between generated lines."""
    eol = draw(LINE_ENDS)
    before = draw(unit_files(eol))
    # A blank line first: generated lines may end in a continuation, which would take the header in
    # (systemd skips comment lines inside one, so `A= \` then `#` then `[Service]` is one value).
    before += ("" if before.endswith(eol) else eol) + eol + "[Service]" + eol
    words = ["/opt/sglang/venv/bin/python", "-m", "sglang.launch_server"]
    for _ in range(draw(st.integers(0, 5))):
        words += [draw(st.sampled_from(["--tp-size", "--port", "--enable-x", "'--quoted-flag'"]))]
        words += draw(st.lists(st.builds(quote_word, VALUES), max_size=1))
    text = "ExecStart=" + words[0]
    for word in words[1:]:
        if draw(st.booleans()):
            text += " \\" + eol + draw(st.sampled_from(["", "  # note" + eol, "; old" + eol])) + "    "
        text += " " + word
    after = draw(unit_files(eol, bom=False))
    return before, text + eol, after


@settings(max_examples=300, deadline=None)
@given(parts=units_around_a_command(), value=VALUES)
def test_set_flag_changes_no_byte_outside_the_command(parts: tuple[str, str, str], value: str) -> None:
    before, command, after = parts
    unit = load_unit({"/u/x.service": before + command + after}, "/u/x.service")
    edited = unit.set_flag("--tp-size", value).render()
    assert edited.startswith(before) and edited.endswith(after)
    reread = load_unit({"/u/x.service": edited}, "/u/x.service")
    assert [i.value for i in reread.flags() if i.name == "--tp-size"][-1] == value
    others = [(i.name, i.value) for i in unit.items() if i.name != "--tp-size"]
    assert [(i.name, i.value) for i in reread.items() if i.name != "--tp-size"] == others
    # the wrapping is the command's own: an edit in place adds no line, a new flag at most one
    had = any(i.name == "--tp-size" for i in unit.items())
    assert len(split_lines(edited)) - len(split_lines(before + command + after)) <= (0 if had else 1)
    if had:
        gone = unit.unset_flag("--tp-size").render()
        assert gone.startswith(before) and gone.endswith(after)
        reread = load_unit({"/u/x.service": gone}, "/u/x.service")
        assert [(i.name, i.value) for i in reread.items()] == others


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_is_refused_or_rendered_back_exactly(text: str) -> None:
    try:
        parsed = parse_unit_file("g.service", text)
    except UnitSyntaxError as e:
        assert str(e).startswith("g.service:")
        return
    assert parsed.render() == text


@settings(max_examples=200, deadline=None)
@given(values=st.lists(VALUES, max_size=6))
def test_quoted_words_tokenise_back(values: list[str]) -> None:
    line = " ".join(["/bin/a", *(quote_word(v) for v in values)])
    assert one_command(line)[1:] == values


# --- the CLI -------------------------------------------------------------------------------


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    unit_cli.add_parser(parser.add_subparsers(dest="command"))
    return unit_cli.run(parser.parse_args(["unit", *argv]))


@pytest.fixture
def unit_dir(tmp_path: Path) -> Path:
    """The hand-written unit with its drop-ins beside it, and an environment file of its own."""
    (tmp_path / "sglang-eagle.service.d").mkdir()
    env_file = tmp_path / "eagle.env"
    env_file.write_text((DATA / "eagle.env").read_text())
    text = (DATA / "sglang-eagle.service").read_text().replace(ENV_FILE, str(env_file))
    (tmp_path / "sglang-eagle.service").write_text(text)
    (tmp_path / "sglang-eagle.service.d" / "10-env.conf").write_text(
        (DATA / "sglang-eagle.service.d" / "10-env.conf").read_text()
    )
    return tmp_path


def test_cli_show_json_follows_the_contract(unit_dir: Path, capsys) -> None:
    path = str(unit_dir / "sglang-eagle.service")
    assert cli("show", path, "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"unit", "defined_in", "exec", "flags", "environment"}
    assert out["unit"] == out["defined_in"] == path
    assert out["exec"] == load_unit(eagle_texts(), FRAGMENT).exec()  # the same argv as on the host
    assert {"name": "--tp-size", "value": "8"} in out["flags"]
    assert {"name": "--trust-remote-code", "value": None} in out["flags"]
    assert out["environment"]["PYTHONUNBUFFERED"] == "1" and out["environment"]["SGLANG_QUOTE"] == "it's"
    assert out["unresolved"] == []  # the optional /etc/sglang/local.env does not exist here: no variables


def test_cli_show_without_json_is_for_people(unit_dir: Path, capsys) -> None:
    assert cli("show", str(unit_dir / "sglang-eagle.service")) == 0
    out = capsys.readouterr().out
    assert '\n  --tp-size "8"\n' in out and "\n  --trust-remote-code\n" in out
    assert '\nenv         PYTHONUNBUFFERED="1"\n' in out


def test_cli_set_prints_the_edited_file(unit_dir: Path, capsys) -> None:
    path = unit_dir / "sglang-eagle.service"
    original = path.read_text()
    assert (
        cli(
            "set",
            str(path),
            "--flag",
            "tp-size=4",
            "--flag=--served-model-name=a b",
            "--flag",
            "enable-lora",
            "--unset",
            "port",
        )
        == 0
    )
    out = capsys.readouterr().out
    assert path.read_text() == original  # stdout only
    assert "    --tp-size 4 \\\n" in out and '    --served-model-name "a b" \\\n' in out
    assert out.endswith(
        "    --host 0.0.0.0 \\\n    --enable-lora\nRestart=on-failure\nRestartSec=5\n"
        "LimitNOFILE=65535\n\n[Install]\nWantedBy=multi-user.target\n"
    )
    assert "--port" not in out


def test_cli_set_in_place_writes_atomically(unit_dir: Path, capsys) -> None:
    path = unit_dir / "sglang-eagle.service"
    path.chmod(0o640)
    expected = load_unit(read_local(path), str(path), search_path=()).set_flag("--tp-size", "2").render()
    assert cli("set", str(path), "--flag=--tp-size=2", "--in-place") == 0
    assert capsys.readouterr().out == ""
    assert path.read_text() == expected
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(os.listdir(unit_dir)) == ["eagle.env", "sglang-eagle.service", "sglang-eagle.service.d"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["show", "/nonexistent/x.service"], "cockpit: /nonexistent/x.service: no such unit file"),
        (
            ["set", "{bad}", "--flag", "tp-size=1"],
            "cockpit: {bad}:3: expected KEY=VALUE, a [Section] header or a comment, got 'ExecStart /bin/true'",
        ),
        (["set", "{good}", "--unset", "tp-size"], "cockpit: good.service has no flag --tp-size"),
        (["set", "{good}"], "cockpit: unit set: give at least one --flag NAME=VALUE or --unset NAME"),
        (["set", "{good}", "--flag", "=3"], "cockpit: --flag '=3': expected NAME=VALUE or NAME"),
        (["set", "{good}", "--flag", "x=\0"], "cockpit: --x: '\\x00' holds '\\x00', which a systemd unit cannot carry"),
    ],
)
def test_cli_bad_input_is_one_sentence_and_exit_2(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    bad = tmp_path / "bad.service"
    bad.write_text("[Service]\n\nExecStart /bin/true\n")
    good = tmp_path / "good.service"
    good.write_text("[Service]\nExecStart=/bin/true --x 1\n")
    argv = [a.replace("{bad}", str(bad)).replace("{good}", str(good)) for a in argv]
    assert cli(*argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.strip() == message.replace("{bad}", str(bad))
