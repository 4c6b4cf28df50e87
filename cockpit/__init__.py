"""SGLang cockpit: a terminal cockpit for SGLang servers run as systemd units.

This package root stays import-light on purpose: the lab's stand-in server imports
`cockpit.lab.standin` inside the lab, where only the standard library exists.
"""

__version__ = "0.1.0"
