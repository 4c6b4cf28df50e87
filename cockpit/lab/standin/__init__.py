"""A CPU stand-in for an SGLang server, run by the lab as `sglang-demo.service`.

It is not SGLang and says so: it parses SGLang's real flag list (from the release installed
beside it), dies with the real release's traceback where real SGLang would, logs in SGLang's
format, and serves SGLang's HTTP endpoints and the OpenAI streaming API at a token rate set
by its `COCKPIT_STANDIN_*` environment. Standard library only: the lab has nothing else.
"""
