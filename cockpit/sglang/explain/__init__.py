"""A traceback's failing statement in terms of flags: the source around the failing line and
the `server_args` fields it reads, named as the flags an operator sets."""
