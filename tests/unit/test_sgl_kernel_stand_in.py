"""The real-SGLang lab's import-only sgl_kernel (cockpit/lab/guest/sgl_kernel_stub): every name
imports, any call says so on stderr (the unit's journal) and raises, and a real sgl_kernel
elsewhere on the path is the one imported. Run in a fresh interpreter each, as a unit runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

STUB = ROOT / "cockpit" / "lab" / "guest" / "sgl_kernel_stub"


def python(code: str, *path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (STUB, *path))}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)


def test_every_name_imports_and_a_call_says_so_then_raises() -> None:
    ran = python(
        "import sgl_kernel\n"
        "from sgl_kernel import weight_packed_linear_cpu\n"
        "print(hasattr(sgl_kernel, '__version__'), weight_packed_linear_cpu.__name__)\n"
        "try:\n"
        "    weight_packed_linear_cpu(1, bias=None)\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
    )
    assert ran.returncode == 0, ran.stderr
    said, raised = ran.stdout.splitlines()
    assert said == "False weight_packed_linear_cpu"  # a dunder probe is no kernel
    assert raised.startswith("cockpit lab: sgl_kernel.weight_packed_linear_cpu called: "), raised
    # Said on stderr before raising: a caller that swallows the error still leaves the line.
    assert ran.stderr == "cockpit lab: sgl_kernel.weight_packed_linear_cpu called\n"


def test_a_real_sgl_kernel_elsewhere_on_the_path_is_the_one_imported(tmp_path: Path) -> None:
    real = tmp_path / "sgl_kernel"
    real.mkdir()
    (real / "__init__.py").write_text("def common_ops():\n    return 'real'\n")
    ran = python("import sgl_kernel\nprint(sgl_kernel.__file__, sgl_kernel.common_ops())", tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [str(real / "__init__.py"), "real"]
    assert ran.stderr == ""
