"""The source pane: the host's file at the failing line, highlighted, with the statement explained.

The file is shown plain at once, then highlighted: pygments lexes the whole file once, in a
thread (a slice lexes wrongly inside docstrings, and `Syntax(line_range=...)` re-lexes from the
top on every jump: docs/facts.md), and the lines are kept per host, path and mtime.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip
from textual.widgets import Static

from cockpit.printable import printable
from cockpit.textlines import source_lines
from cockpit.traceback.model import Traceback
from cockpit.ui.failures import said_failure
from cockpit.ui.panes.cursor import CursorView

_HIGHLIGHTED: dict[tuple[str, str, float], list[list[tuple[str, Style]]]] = {}  # (host, path, mtime) -> lines


HighlightedLine = list[tuple[str, Style]]


def highlight(text: str, theme: str) -> list[HighlightedLine]:
    """Every line of a Python file as (text, style) runs, from one pygments pass over the whole
    file. Going through pygments directly costs half of what rich's Syntax.highlight and
    Text.split cost on a 400 KB file. Token styles carry no background: a theme's background
    would paint over the failing-line and statement marks. A control character in the file
    (it is the host's) is drawn as its escape, as `SourceView.show` draws the plain lines.
    pygments is imported here, in the highlighting thread, not with the app (whose first
    screen shows no source)."""
    # Pygments ships no type information and types-Pygments is not a dev dependency (yet); with
    # the stubs installed these imports check clean, hence unused-ignore as well.
    from pygments.lexers import PythonLexer  # type: ignore[import-untyped, unused-ignore]
    from pygments.styles import get_style_by_name  # type: ignore[import-untyped, unused-ignore]

    style = get_style_by_name(theme)
    styles: dict[object, Style] = {}
    lines: list[HighlightedLine] = [[]]
    for token, value in PythonLexer(stripnl=False, ensurenl=False).get_tokens(text):
        s = styles.get(token)
        if s is None:
            spec = style.style_for_token(token)
            s = Style(
                color=f"#{spec['color']}" if spec["color"] else None,
                bold=spec["bold"] or None,
                italic=spec["italic"] or None,
                underline=spec["underline"] or None,
            )
            styles[token] = s
        first, *rest = printable(value, lines=True).split("\n")
        if first:
            lines[-1].append((first, s))
        for part in rest:
            lines.append([(part, s)] if part else [])
    return lines


@dataclass(frozen=True)
class Shown:
    host: str
    path: str
    mtime: float
    line: int  # the failing line
    start: int  # the statement's range
    end: int


class SourceView(CursorView):
    BINDINGS = [
        Binding("j,down", "move(1)", "Down", show=False, id="source.down"),
        Binding("k,up", "move(-1)", "Up", show=False, id="source.up"),
        Binding("g,home", "edge(0)", "Top", show=False, id="source.top"),
        Binding("G,end", "edge(1)", "Bottom", show=False, id="source.bottom"),
        Binding("ctrl+d,pagedown", "page(1)", "Page down", show=False, id="source.page_down"),
        Binding("ctrl+u,pageup", "page(-1)", "Page up", show=False, id="source.page_up"),
        Binding("c", "center", "Failing line", show=False, id="source.center"),
    ]
    COMPONENT_CLASSES = {"source--gutter", "source--failing", "source--statement", "source--match", "source--cursor"}

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.lines: list[str] = []
        self.highlighted: list[HighlightedLine] | None = None
        self.shown: Shown | None = None
        self.search: re.Pattern[str] | None = None

    def show(self, shown: Shown, text: str, highlighted: list[HighlightedLine] | None) -> None:
        self.shown = shown
        self.lines = [printable(line) for line in source_lines(text)]
        self.highlighted = highlighted
        width = max((len(line) for line in self.lines), default=0)
        self.virtual_size = Size(width + self._gutter_width() + 2, len(self.lines))
        self.cursor = shown.line - 1
        self.call_after_refresh(self.action_center)
        self.refresh()

    def set_highlighted(self, lines: list[HighlightedLine]) -> None:
        self.highlighted = lines
        self.refresh()

    def _gutter_width(self) -> int:
        return len(str(max(1, len(self.lines)))) + 3

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if index >= len(self.lines) or self.shown is None:
            return Strip.blank(width, base)
        number = index + 1
        shown = self.shown
        line_style = base
        mark = " "
        if number == shown.line:
            line_style = base + self.get_component_rich_style("source--failing")
            mark = "▶"
        elif shown.start <= number <= shown.end:
            line_style = base + self.get_component_rich_style("source--statement")
            mark = "┃"
        if index == self.cursor and self.has_focus:
            line_style = line_style + self.get_component_rich_style("source--cursor")
        gutter_w = self._gutter_width()
        gutter = Segment(f"{number:>{gutter_w - 2}}{mark} ", base + self.get_component_rich_style("source--gutter"))
        if self.highlighted is not None and index < len(self.highlighted):
            body = [Segment(text, line_style + style) for text, style in self.highlighted[index]]
        else:
            body = [Segment(self.lines[index], line_style)]
        if self.search is not None:
            body = self._mark_matches(body, self.lines[index])
        content = Strip(body).crop(scroll_x, scroll_x + width - gutter_w)
        return Strip([gutter, *content]).extend_cell_length(width, line_style)

    def _mark_matches(self, body: list[Segment], plain: str) -> list[Segment]:
        assert self.search is not None
        spans = [(m.start(), m.end()) for m in self.search.finditer(plain) if m.end() > m.start()]
        if not spans:
            return body
        match = self.get_component_rich_style("source--match")
        out, pos = [], 0
        for seg in body:
            text, style = seg.text, seg.style or Style()
            cut = 0
            for a, b in spans:
                lo, hi = max(a - pos, 0), min(b - pos, len(text))
                if lo >= hi:
                    continue
                out.append(Segment(text[cut:lo], style))
                out.append(Segment(text[lo:hi], style + match))
                cut = hi
            out.append(Segment(text[cut:], style))
            pos += len(text)
        return out

    def line_count(self) -> int:
        return len(self.lines)

    def action_edge(self, bottom: int) -> None:
        self._move_to(len(self.lines) - 1 if bottom else 0)

    def action_center(self) -> None:
        if self.shown is None:
            return
        self.cursor = self.shown.line - 1
        height = self.scrollable_content_region.height
        self.scroll_to(y=max(0, self.shown.line - 1 - height // 2), animate=False, immediate=True)

    def goto(self, number: int) -> None:
        self._move_to(number - 1)
        height = self.scrollable_content_region.height
        self.scroll_to(y=max(0, number - 1 - height // 2), animate=False, immediate=True)

    def find(self, pattern: re.Pattern[str], forward: bool = True) -> bool:
        n = len(self.lines)
        for k in range(1, n + 1):
            index = (self.cursor + k) % n if forward else (self.cursor - k) % n
            if pattern.search(self.lines[index]):
                self.goto(index + 1)
                return True
        return False


class SourcePane(Vertical):
    """The source view, a title naming file and frame, and the explanation underneath."""

    BINDINGS = [
        Binding("u", "walk(-1)", "Up the stack", id="source.stack_up"),
        Binding("d", "walk(1)", "Down the stack", id="source.stack_down"),
        Binding("slash", "prompt('source-search')", "Search", key_display="/", show=False, id="source.search"),
        Binding("n", "search_next(1)", "Next match", show=False, id="source.search_next"),
        Binding("N", "search_next(-1)", "Prev match", show=False, id="source.search_previous"),
        Binding("colon", "prompt('goto')", "Go to line", key_display=":", show=False, id="source.goto"),
        Binding("e", "edit", "Edit these flags", id="source.edit"),
        Binding("O", "open_anyway", "Open anyway", show=False, id="source.open_anyway"),
        Binding("escape", "close", "Close", id="source.close"),
    ]
    on_worker_state_changed = said_failure  # a worker that ended in error is said (cockpit.ui.failures)

    class Open(Message):
        """Ask the app to open a frame of a traceback in this pane (`anyway`: the user asked for
        this file even though it lies outside the service's Python roots)."""

        def __init__(self, traceback: Traceback, frame: int, anyway: bool = False) -> None:
            super().__init__()
            self.traceback = traceback
            self.frame = frame
            self.anyway = anyway

    class Closed(Message):
        pass

    class Edit(Message):
        """Open the flag editor on the flags the failing statement reads."""

        def __init__(self, flags: list[str]) -> None:
            super().__init__()
            self.flags = flags

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.traceback: Traceback | None = None
        self.frame = 0
        self.flags: list[str] = []
        self.refused = False  # the file shown was refused as outside the roots: `O` opens it

    def compose(self) -> ComposeResult:
        yield SourceView(id="source-view")
        yield Static("", id="explanation", markup=False)

    @property
    def view(self) -> SourceView:
        return self.query_one(SourceView)

    def set_message(self, text: str) -> None:
        self.query_one("#explanation", Static).update(text)

    def set_title(self, text: str) -> None:
        self.border_title = Content(text)  # a path from a traceback: never markup

    def action_walk(self, step: int) -> None:
        if self.traceback is None:
            return
        frames = self.traceback.sites
        target = self.frame + step
        while 0 <= target < len(frames) and (frames[target].line is None or frames[target].file.startswith("<")):
            target += step  # <frozen runpy> and <string> frames have no file to show
        if 0 <= target < len(frames):
            self.post_message(self.Open(self.traceback, target))

    def action_prompt(self, kind: str) -> None:
        from cockpit.ui.panes.journal import JournalView

        self.post_message(JournalView.Prompt(kind))

    def action_search_next(self, direction: int) -> None:
        view = self.view
        if view.search is not None:
            view.find(view.search, forward=direction > 0)

    def action_open_anyway(self) -> None:
        if self.refused and self.traceback is not None:
            self.post_message(self.Open(self.traceback, self.frame, anyway=True))

    def action_close(self) -> None:
        self.post_message(self.Closed())

    def action_edit(self) -> None:
        self.post_message(self.Edit(self.flags))

    @work(thread=True, exclusive=True, group="highlight", exit_on_error=False)
    def highlight_in_thread(self, key: tuple[str, str, float], text: str, theme: str) -> None:
        lines = _HIGHLIGHTED.get(key)
        if lines is None:
            lines = highlight(text, theme)
            _HIGHLIGHTED[key] = lines
            while len(_HIGHLIGHTED) > 32:
                _HIGHLIGHTED.pop(next(iter(_HIGHLIGHTED)))
        shown = self.view.shown
        if shown is not None and (shown.host, shown.path, shown.mtime) == key:
            self.app.call_from_thread(self.view.set_highlighted, lines)


def cached_highlight(key: tuple[str, str, float]) -> list[HighlightedLine] | None:
    return _HIGHLIGHTED.get(key)
