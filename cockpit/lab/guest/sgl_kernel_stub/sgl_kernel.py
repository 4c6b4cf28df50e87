"""sgl_kernel STAND-IN of the cockpit lab: import-only, it holds no kernel.

SGLang 0.5.23 on a CPU (SGLANG_USE_CPU_ENGINE=1) imports `*_cpu` functions from sgl_kernel at
module level, and the CPU build of sgl-kernel is not on PyPI (it is only built from source; the
wheels there are CUDA builds). Every name here is a function that writes
`cockpit lab: sgl_kernel.NAME called` to stderr (the journal) and raises, so a server that
serves through this module proves that none was called, and a caller that swallows the error
still leaves the line. It sits on the real-SGLang units' PYTHONPATH only, and steps aside for a
real sgl_kernel found anywhere else on the path, so it never shadows one.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from importlib.machinery import PathFinder
from pathlib import Path
from typing import NoReturn

NAME = "sgl_kernel"
CALLED = "cockpit lab: sgl_kernel.{name} called"  # the line a lab test looks for in the journal


def _real_spec() -> importlib.machinery.ModuleSpec | None:
    here = Path(__file__).resolve().parent
    elsewhere = [p for p in sys.path if Path(p or ".").resolve() != here]
    return PathFinder.find_spec(NAME, elsewhere)


def _stand_in(name: str) -> Callable[..., NoReturn]:
    def called(*args: object, **kwargs: object) -> NoReturn:
        said = CALLED.format(name=name)
        print(said, file=sys.stderr, flush=True)
        raise RuntimeError(f"{said}: the lab's import-only sgl_kernel holds no kernel")

    called.__name__ = called.__qualname__ = name
    return called


def __getattr__(name: str) -> Callable[..., NoReturn]:
    if name.startswith("__"):  # the import system's and tools' probes are not kernels
        raise AttributeError(name)
    return _stand_in(name)


# Only as the units import it: a test imports this file by its path in the cockpit package.
_spec = _real_spec() if __name__ == NAME else None
if _spec is not None and _spec.loader is not None:  # a real sgl_kernel: it is the one imported
    _real = importlib.util.module_from_spec(_spec)
    sys.modules[NAME] = _real
    _spec.loader.exec_module(_real)
