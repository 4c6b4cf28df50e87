"""The stand-in's detokenizer process (`sglang::detokenizer`, as SGLang titles its own): it does
nothing but live, so that the server's process tree has the shape of SGLang's, and so that the
dead-detokenizer mode has a process to lose. It ends when the server does (its stdin closes)."""

from __future__ import annotations

import sys

from cockpit.lab.standin.proctitle import take_title

if __name__ == "__main__":
    take_title()
    sys.stdin.read()
