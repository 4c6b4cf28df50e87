"""What a release of SGLang is, read from its own source: its flags (types, choices, help,
aliases), where its source and wheel are kept, and whether its health endpoints generate."""
