"""A change rolled out and watched: one unit's write, restart and watch as an attempt
(`single`), and a launch over nodes restarted as one (`group`)."""
