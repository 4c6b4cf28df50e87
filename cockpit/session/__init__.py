"""The core session: one open unit, shared by the app and every headless subcommand."""

from cockpit.session.journal_feed import JournalBatch, JournalFeed
from cockpit.session.session import FrameView, Listener, RecordedSession, Session

__all__ = ["FrameView", "JournalBatch", "JournalFeed", "Listener", "RecordedSession", "Session"]
