"""Write a word-level tokenizer that needs no Hub, so a peer benchmark counts tokens as the stand-in does.

The stand-in counts prompt tokens as whitespace-separated words and reports output tokens in
`usage`. This tokenizer splits on whitespace only (one token per word) and decodes by joining
with single spaces, so a synthetic prompt of N tokens is N words on the wire and N prompt tokens
to the stand-in. Its vocabulary is every whitespace word of the peer's own prompt source (AIPerf's
corpus files; for guidellm, Faker's English lorem words as Faker's `text()` writes them: lower
case, capitalised, with a full stop, and the numbers and turn tags guidellm puts first in each
prompt to make it unique) plus the stand-in's output words, so nothing decodes to an unknown token
(which a decode with `skip_special_tokens` would drop, shortening the prompt). evalscope's random
prompts are drawn from the vocabulary itself, so any of these serves it.

Run with the PEER's Python (it needs `tokenizers`, which every peer brings):
    /tmp/peer-venv/bin/python benchmarks/peers/make_word_tokenizer.py OUT_DIR [CORPUS_FILE ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

STANDIN_WORDS = (
    "the",
    "stand",
    "in",
    "decodes",
    "tokens",
    "at",
    "a",
    "set",
    "rate",
    "for",
    "cockpit",
    "lab",
    "no",
    "gpu",
    "is",
    "used",
    "here",
)


def corpus_files() -> list[Path]:
    try:
        import aiperf.dataset.generator.prompt as prompt_mod
    except ImportError:
        return []
    return sorted((Path(prompt_mod.__file__).parent / "assets").glob("*.txt"))


def faker_words() -> list[str]:
    """Faker's English lorem words in every form its `text()` emits (guidellm's synthetic prompts)."""
    try:
        from faker.providers.lorem.en_US import Provider
    except ImportError:
        return []
    words = [form for w in Provider.word_list for form in (w, w.capitalize(), w + ".", w.capitalize() + ".")]
    # guidellm starts each synthetic prompt with "{epoch} {sample} m{turn} " to make it unique
    return words + [str(i) for i in range(10_000)] + [f"m{i}" for i in range(100)]


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    files = [Path(a) for a in argv[1:]] or corpus_files()
    words: dict[str, int] = {"[UNK]": 0, "</s>": 1}
    for w in STANDIN_WORDS:
        words.setdefault(w, len(words))
    for f in files:
        for w in f.read_text(encoding="utf-8", errors="replace").split():
            words.setdefault(w, len(words))
    for w in faker_words():
        words.setdefault(w, len(words))
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="\x00", cleanup=False)  # joins tokens with one space
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "unk_token": "[UNK]",
                "eos_token": "</s>",
                "model_max_length": 1_000_000,
                "clean_up_tokenization_spaces": False,
            }
        )
    )
    (out / "special_tokens_map.json").write_text(json.dumps({"unk_token": "[UNK]", "eos_token": "</s>"}))
    print(json.dumps({"tokenizer": str(out), "vocab": len(words), "corpus_files": [str(f) for f in files]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
