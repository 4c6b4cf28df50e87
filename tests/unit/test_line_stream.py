"""A stream read in chunks is split into the same lines, whatever the chunks' edges."""

from __future__ import annotations

import asyncio
import random

from cockpit.remote.base import LineStream


class Chunks(LineStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def read_chunk(self) -> bytes:
        await asyncio.sleep(0)
        return self.chunks.pop(0) if self.chunks else b""

    @property
    def returncode(self) -> int | None:
        return 0

    async def stderr_text(self) -> str:
        return ""


async def collect(stream: LineStream) -> list[list[bytes]]:
    return [batch async for batch in stream.batches()]


def test_lines_cut_anywhere_come_back_whole_and_in_order() -> None:
    text = b"".join(b'{"MESSAGE":"line %d","x":"%s"}\n' % (i, b"y" * (i % 37)) for i in range(2000)) + b"\n"
    rng = random.Random(7)
    cuts = sorted(rng.sample(range(1, len(text)), 300))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    batches = asyncio.run(collect(Chunks(chunks)))
    assert [line for batch in batches for line in batch] == text.split(b"\n")[:-1]
    assert len(batches) < 301  # one batch per chunk that ended a line, not one per line
    assert all(batches)


def test_a_last_line_without_newline_is_given_at_the_end() -> None:
    batches = asyncio.run(collect(Chunks([b"a\nb", b"c\n\nd"])))
    assert batches == [[b"a"], [b"bc", b""], [b"d"]]


def test_iterating_the_stream_gives_one_line_at_a_time() -> None:
    async def lines() -> list[bytes]:
        return [line async for line in Chunks([b"one\ntw", b"o\nthree"])]

    assert asyncio.run(lines()) == [b"one", b"two", b"three"]
