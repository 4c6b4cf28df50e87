"""The load runner on a stream real SGLang 0.5.23 sent (tests/data/sglang-0.5.23/README.md): 16
tokens in 16 chunks, every other one with empty text (the lab's random model emits `<unk>`, which
decodes to nothing), each chunk's tokens in its continuous usage."""

from __future__ import annotations

from pathlib import Path

from cockpit.load.runner import LoadConfig, Runner
from tests.http_answers import answering

STREAM = (Path(__file__).parents[1] / "data" / "sglang-0.5.23" / "real-tp1-stream-empty-text.sse").read_bytes()


async def test_a_token_without_text_is_a_chunk_of_one_token_and_the_warm_up_is_counted() -> None:
    async with answering([STREAM, STREAM]) as port:
        config = LoadConfig(f"http://127.0.0.1:{port}", concurrency=(1,), requests=1, warmup=1, model="m")
        [level] = await Runner(config).run()
    assert (level.errors, level.output_tokens, level.token_count_source) == (0, 16, "usage")
    # A plain server sends a token a chunk: read as 2 when the empty ones were skipped, an accept
    # length of 2 on a server that does not speculate.
    assert level.tokens_per_chunk == 1.0
    assert level.prompt_tokens == 8  # its eight NATO words, each `<unk>` to the lab's tokenizer
    assert (level.warmup_requests, level.warmup_output_tokens, level.warmup_prompt_tokens) == (1, 16, 8)
