"""The house rule: only cockpit/ui imports Textual; the core stays usable headless."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "cockpit"


def textual_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found += [
            f"{path.relative_to(ROOT)}:{node.lineno}: {n}"
            for n in names
            if n.split(".")[0] in ("textual", "textual_plotext")
        ]
    return found


def test_no_module_outside_ui_imports_textual() -> None:
    offenders = [
        hit
        for p in sorted(PACKAGE.rglob("*.py"))
        if "ui" not in p.relative_to(PACKAGE).parts[:1]
        for hit in textual_imports(p)
    ]
    assert offenders == []


def test_the_check_catches_an_offender(tmp_path: Path) -> None:
    bad = ROOT / "cockpit" / "_layering_probe.py"
    try:
        bad.write_text("from textual.app import App\n")
        assert textual_imports(bad) == ["cockpit/_layering_probe.py:1: textual.app"]
    finally:
        bad.unlink()


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


def test_import_linter_contract_names_every_core_module() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    covered = set(contract["source_modules"])
    top = {
        f"cockpit.{p.stem if p.is_file() else p.name}"
        for p in PACKAGE.iterdir()
        if (p.suffix == ".py" and p.stem not in ("__init__", "__main__"))
        or (p.is_dir() and (p / "__init__.py").exists())
    }
    assert top - {"cockpit.ui"} <= covered, sorted(top - {"cockpit.ui"} - covered)


def test_import_linter_contract_holds() -> None:
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports"))], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 1 kept, 0 broken" in proc.stdout


def test_ruff_finds_no_faults() -> None:
    """Unused imports and names, undefined names: what dead code and typos leave behind."""
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ruff")), "check", "cockpit", "tests", "benchmarks"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_not_lab_selects_no_test_that_needs_a_lab() -> None:
    """Lab tests are marked by where they live and by the lab fixtures they take, so
    `-m "not lab"` (what runs without root) collects none of them."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "-m", "not lab", "tests"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    ).stdout
    ids = [line for line in out.splitlines() if "::" in line]
    assert ids and not [i for i in ids if i.startswith("tests/lab/") or "_lab.py::" in i or "in_the_lab" in i]
