"""Code that fails the ways a server does, for real tracebacks in tests and in the lab.

Kept out of the test modules: pytest rewrites the `assert` statements of those, which
would change the messages Python prints. The lab's scenario scripts carry this file too.
"""

from __future__ import annotations


class Cfg:
    speculative_eagle_topk: int | None = 4
    speculative_num_draft_tokens: int | None = 3
    speculative_num_steps: int | None = None


def check_eagle(cfg: Cfg) -> None:
    if cfg.speculative_num_steps is None:
        assert (
            cfg.speculative_eagle_topk is None
            and cfg.speculative_num_draft_tokens is None
        )


def resolve(cfg: Cfg) -> None:
    check_eagle(cfg)


def fail(i: int) -> None:
    raise ValueError(f"bad {i}\nsecond line of {i}")


def chained() -> None:
    """KeyError, the direct cause of a RuntimeError, during whose handling a ValueError."""
    try:
        try:
            {}["missing"]
        except KeyError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError:
        fail(3)


def group() -> None:
    errors: list[Exception] = []
    for i in range(2):
        try:
            fail(i)
        except ValueError as e:
            errors.append(e)
    try:
        try:
            {}["k"]
        except KeyError as e:
            raise TypeError("inner") from e
    except TypeError as t:
        errors.append(t)
    errors.append(ExceptionGroup("nested", [OSError(2, "nope"), RuntimeError()]))
    raise ExceptionGroup("many", errors)


def group_handled() -> BaseException:
    """What `except*` raises when its handler fails: a group with no traceback of its own,
    as long as it is caught in the frame that raised it."""
    try:
        try:
            group()
        except* ValueError:
            raise RuntimeError("during")
    except BaseException as e:  # noqa: BLE001 - the group is the subject here
        return e
    raise AssertionError("except* did not raise")


def syntax() -> None:
    compile("x = (1,\n", "<cell>", "exec")


def cuda() -> None:
    raise RuntimeError("CUDA error: an illegal memory access was encountered\n"
                       "CUDA kernel errors might be asynchronously reported at some other API call, so the "
                       "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1")


def down(n: int) -> int:
    return down(n + 1)


def raised(fn, *args) -> BaseException:
    try:
        fn(*args)
    except BaseException as e:  # noqa: BLE001 - any exception is the subject here
        return e
    raise AssertionError(f"{fn.__name__} did not raise")
