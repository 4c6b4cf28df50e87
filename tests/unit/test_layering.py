"""The house rule: only cockpit/ui imports Textual; the core stays usable headless."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "cockpit"


def textual_imports(path: Path, root: Path = ROOT) -> list[str]:
    """Each import of Textual in the file, as `path relative to root:line: module`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found += [
            f"{path.relative_to(root)}:{node.lineno}: {n}"
            for n in names
            if n.split(".")[0] in ("textual", "textual_plotext")
        ]
    return found


def offenders(package: Path = PACKAGE, root: Path = ROOT) -> list[str]:
    """The Textual imports of every module of the package outside its ui subpackage."""
    return [
        hit
        for p in sorted(package.rglob("*.py"))
        if "ui" not in p.relative_to(package).parts[:1]
        for hit in textual_imports(p, root)
    ]


def test_no_module_outside_ui_imports_textual() -> None:
    assert offenders() == []


def test_the_check_catches_an_offender(tmp_path: Path) -> None:
    """The same check on a package made in tmp_path (nothing is written to cockpit/): every form of
    import outside ui is caught, a relative import of a module that happens to be called textual is not."""
    package = tmp_path / "cockpit"
    (package / "ui").mkdir(parents=True)
    (package / "ui" / "app.py").write_text("from textual.app import App\n")  # the ui package may
    (package / "_layering_probe.py").write_text(
        "import os\nfrom textual.app import App\nimport json, textual_plotext as tp\n"
        "def later():\n    import textual.widgets\nfrom . import textual\n"
    )
    assert offenders(package, tmp_path) == [
        "cockpit/_layering_probe.py:2: textual.app",
        "cockpit/_layering_probe.py:3: textual_plotext",
        "cockpit/_layering_probe.py:5: textual.widgets",
    ]


def test_importing_the_core_loads_no_textual() -> None:
    """Indirect imports count too: import every core module and look at sys.modules."""
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in PACKAGE.rglob("*.py")
        if "ui" not in p.relative_to(PACKAGE).parts[:1] and p.name != "__main__.py"
    )
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'textual_plotext')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def _contracts() -> list[dict]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def _top_parts() -> set[str]:
    return {
        f"cockpit.{p.stem if p.is_file() else p.name}"
        for p in PACKAGE.iterdir()
        if (p.suffix == ".py" and p.stem not in ("__init__", "__main__"))
        or (p.is_dir() and (p / "__init__.py").exists())
    }


def test_every_part_of_the_package_has_one_layer() -> None:
    """A new module or package must be placed in the layers, or the contract would not see it."""
    layers = next(c for c in _contracts() if c["type"] == "layers")
    placed = [part.strip() for layer in layers["layers"] for part in layer.split("|")]
    assert sorted(placed) == sorted(_top_parts())
    assert layers["unmatched_ignore_imports_alerting"] == "error"


def test_every_concern_of_the_sglang_package_has_one_layer() -> None:
    """cockpit.sglang is a package a concern (issue 26): a new one is placed in their contract,
    and no module is left beside them."""
    layers = [c for c in _contracts() if c["type"] == "layers"][1]
    placed = sorted(part.strip() for layer in layers["layers"] for part in layer.split("|"))
    sglang = PACKAGE / "sglang"
    assert placed == sorted(f"cockpit.sglang.{p.name}" for p in sglang.iterdir() if (p / "__init__.py").exists())
    assert [p.name for p in sglang.glob("*.py")] == ["__init__.py"]


def test_the_textual_contract_names_every_part_below_the_ui() -> None:
    textual = next(c for c in _contracts() if c["type"] == "forbidden")
    assert set(textual["source_modules"]) == _top_parts() - {"cockpit.ui", "cockpit.cli", "cockpit.command"}


def test_import_linter_contracts_hold() -> None:
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports"))], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 4 kept, 0 broken" in proc.stdout


def test_the_layers_contract_catches_an_upward_import(tmp_path: Path) -> None:
    """The same kind of contract over a package made in tmp_path, with one import going up."""
    package = tmp_path / "probe"
    for name, text in {
        "__init__.py": "",
        "low.py": "from probe import high\n",  # the offence: the bottom layer imports the top one
        "high.py": "from probe import low\n",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    (tmp_path / "setup.cfg").write_text(
        "[importlinter]\nroot_package = probe\n\n[importlinter:contract:layers]\nname = probe layers\n"
        "type = layers\nlayers =\n    probe.high\n    probe.low\n"
    )
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--config", str(tmp_path / "setup.cfg")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "probe.low -> probe.high" in proc.stdout


def test_no_module_of_the_package_imports_itself_round_a_circle() -> None:
    """Direct imports anywhere in a module (inside functions too), as grimp reads them."""
    import grimp

    graph = grimp.build_graph("cockpit")
    circles = [
        (m, other)
        for m in sorted(graph.modules)
        for other in graph.find_modules_directly_imported_by(m)
        if m != other and graph.chain_exists(importer=other, imported=m)
    ]
    assert circles == []


def test_ruff_finds_no_faults() -> None:
    """Unused imports and names, undefined names: what dead code and typos leave behind."""
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ruff")), "check", "cockpit", "tests", "benchmarks"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def collected(marks: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "-m", marks, "tests"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    ).stdout
    return [line for line in out.splitlines() if "::" in line]


def test_not_lab_selects_no_test_that_needs_a_lab() -> None:
    """Lab tests live in tests/lab, which marks them all, so `-m "not lab"` (what runs without root)
    collects none of them and `-m lab` nothing else; a test elsewhere that takes a lab fixture
    would be marked too (tests/conftest.py) and show up here outside tests/lab."""
    lab, not_lab = collected("lab"), collected("not lab")
    assert lab and all(i.startswith("tests/lab/") for i in lab), [i for i in lab if not i.startswith("tests/lab/")]
    assert not_lab and not [i for i in not_lab if i.startswith("tests/lab/") or "_lab.py::" in i or "in_the_lab" in i]


def test_the_tests_run_on_every_release_are_the_modules_named() -> None:
    """`make test`'s trixie pass (`-m every_release`) runs the modules EVERY_RELEASE names, each
    one there, and no real-SGLang test (SGLang's wheels are for bookworm's Python)."""
    from tests.lab.conftest import EVERY_RELEASE

    every = collected("every_release")
    modules = {line.split("::")[0].removeprefix("tests/lab/") for line in every}
    assert modules == set(EVERY_RELEASE), modules ^ set(EVERY_RELEASE)
    assert not set(every) & set(collected("real_sglang"))


def test_what_runs_before_the_early_ssh_imports_no_asyncio() -> None:
    """`cockpit status` and the app fork their OpenSSH master after parsing the arguments and
    building its command (cockpit.cli.target.early_reader), and import asyncio (23 ms) only
    after: an annotation's import in systemd/status.py once put asyncio before the fork and
    cost the login 40 ms."""
    code = (
        "import sys\nimport cockpit.cli\nimport cockpit.cli.target, cockpit.remote.mux, cockpit.systemd.status\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'asyncio'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


# What the app's first screen does not draw: imported where it is first opened (the throughput
# pane's chart, the source pane's highlighting, the flag editor's pre-flight, the fleet, the unit's
# deployment and its release's catalog), so that the unit's state is on screen before they load.
NOT_FOR_THE_FIRST_SCREEN = (
    "plotext",
    "textual_plotext",
    "pygments",
    "cockpit.sglang.preflight",
    "cockpit.sglang.explain",
    "cockpit.sglang.catalog",
    "cockpit.sglang.deployments.deployment",
    "cockpit.sglang.deployments.fleet",
    "cockpit.systemd.unit",
    "cockpit.ui.screens.fleet",
    "cockpit.ui.screens.write",
)


def test_the_app_imports_nothing_its_first_screen_does_not_draw() -> None:
    code = (
        "import sys\nimport cockpit.ui.app\n"
        f"print(sorted(m for m in sys.modules if m.startswith({NOT_FOR_THE_FIRST_SCREEN!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
