"""The flags of a server's argv: `--name value`, `--name=value` and switches, the way argparse
will read them, found after the program and whatever precedes the first `--flag`
(`python -u -m sglang.launch_server` is all program).

Whether `--x` takes the next word is decided by a flag table when there is one (SGLang's flag
catalog of the release is one: this module needs only the argparse shape of each flag, so it
names a protocol and knows nothing of SGLang), else by the heuristic "the next word does not
start with `--`". Words that are neither a flag nor a flag's value stay positional, in place."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class FlagShape(Protocol):
    """What argparse needs of a flag to read its values."""

    @property
    def takes_value(self) -> bool: ...

    @property
    def nargs(self) -> str | int | None: ...


class FlagTable(Protocol):
    """Flags by any of their spellings (`cockpit.sglang.catalog.flags.Catalog` is one)."""

    def get(self, name: str) -> FlagShape | None: ...


Value = str | tuple[str, ...] | None


@dataclass(frozen=True)
class Item:
    """One flag with its value, or one positional argument (`name` None)."""

    name: str | None  # "--tp-size"
    value: Value  # a string, a tuple for flags that take several values, None for a switch
    args: tuple[int, ...]  # the argv indices it spans
    inline: bool = False  # written `--name=value`

    @property
    def is_flag(self) -> bool:
        return self.name is not None

    @property
    def json_value(self) -> str | list[str] | None:
        """The value as `cockpit unit show --json` and the attempt log write it."""
        return list(self.value) if isinstance(self.value, tuple) else self.value


def flag_name(name: str) -> str:
    """`tp-size`, `--tp-size`: both spell `--tp-size`."""
    return name if name.startswith("-") else "--" + name


def same_flag(a: str, b: str, catalog: FlagTable | None) -> bool:
    """The same flag, by spelling or, with a catalog, as aliases of one flag (`--tp`, `--tp-size`)."""
    if a == b:
        return True
    if catalog is None:
        return False
    fa = catalog.get(a)
    return fa is not None and fa == catalog.get(b)


def _value_count(
    name: str, argv: Sequence[str], start: int, opaque: Sequence[bool], catalog: FlagTable | None
) -> tuple[int, bool]:
    """How many of the words from argv[start] are this flag's values, and whether it takes
    several. Counted in place: slicing the rest of argv for each flag made long command
    lines quadratic (20,000 flags took 12.8 s)."""
    available, n = 0, len(argv)
    while start + available < n and not argv[start + available].startswith("--") and not opaque[start + available]:
        available += 1
    flag = catalog.get(name) if catalog is not None else None
    if flag is None:
        return min(1, available), False
    if not flag.takes_value:
        return 0, False
    if flag.nargs in ("+", "*"):
        return available, True
    if isinstance(flag.nargs, int) and flag.nargs > 1:
        return min(flag.nargs, available), True
    return min(1, available), False


def parse_items(
    argv: Sequence[str], catalog: FlagTable | None = None, opaque: frozenset[int] = frozenset()
) -> tuple[int, list[Item]]:
    """(head, items): argv[:head] is the program part; items cover argv[head:] in order.
    Indices in `opaque` (an unknown `$VAR`) are never taken as a flag's value."""
    hidden = [i in opaque for i in range(len(argv))]
    head = next((i for i in range(1, len(argv)) if argv[i].startswith("--")), len(argv))
    items: list[Item] = []
    i = head
    while i < len(argv):
        word = argv[i]
        if word == "--":  # argparse's end of options: the rest is positional
            items += [Item(None, argv[j], (j,)) for j in range(i, len(argv))]
            break
        if not word.startswith("--"):
            items.append(Item(None, word, (i,)))
            i += 1
            continue
        name, eq, inline = word.partition("=")
        if eq:
            items.append(Item(name, inline, (i,), inline=True))
            i += 1
            continue
        count, several = _value_count(name, argv, i + 1, hidden, catalog)
        values = tuple(argv[i + 1 : i + 1 + count])
        value: Value = values if several else (values[0] if values else None)
        items.append(Item(name, value, tuple(range(i, i + 1 + count))))
        i += 1 + count
    return head, items
