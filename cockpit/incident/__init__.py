"""The incident note: a Markdown file that tells what happened to a unit, beside its screenshots.
Three rooms: `model` (the plain data), `gather` (reading it over a host), `render` (Markdown)."""

from cockpit.incident.gather import excerpt_of, gather, load_run_file, period_entries, tracebacks_in
from cockpit.incident.model import Image, Incident, SourceExcerpt, attempts_in, unit_events
from cockpit.incident.render import render

__all__ = [
    "Image",
    "Incident",
    "SourceExcerpt",
    "attempts_in",
    "excerpt_of",
    "gather",
    "load_run_file",
    "period_entries",
    "render",
    "tracebacks_in",
    "unit_events",
]
