"""A server's answers that are not the shape the API promises (a hostile or broken host) fail a
request or the run with one sentence, never the runner with a traceback."""

from __future__ import annotations

import pytest

from cockpit.errors import CockpitError
from cockpit.load.runner import LoadConfig, Runner
from tests.http_answers import answering

DEEP = b"[" * 100_000 + b"]" * 100_000


def _stream(*events: bytes) -> bytes:
    return b"".join(b"data: " + e + b"\n\n" for e in (*events, b"[DONE]"))


@pytest.mark.parametrize("models", [DEEP, b'{"data": []}', b'{"data": [{"id": 7}]}', b"[1]"])
async def test_a_models_answer_without_a_model_name_is_one_sentence(models: bytes) -> None:
    async with answering([models]) as port:
        config = LoadConfig(f"http://127.0.0.1:{port}", concurrency=(1,), requests=1, warmup=0)
        with pytest.raises(CockpitError, match="named no model"):
            await Runner(config).run()


async def test_stream_events_of_the_wrong_shape_fail_their_request_and_the_level_goes_on() -> None:
    bodies = [
        _stream(DEEP),  # nested past the decoder's recursion
        _stream(b"[1, 2]"),  # a list where an object belongs
        _stream(b'{"choices": "x"}'),  # a string where the choices are
        _stream(b'{"choices": [{"text": "ok"}], "usage": {"completion_tokens": "many"}}'),
    ]
    async with answering(bodies) as port:
        config = LoadConfig(f"http://127.0.0.1:{port}", concurrency=(1,), requests=4, warmup=0, model="m")
        [level] = await Runner(config).run()
    assert level.errors == 4
