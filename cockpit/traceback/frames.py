"""Where a traceback points: its frames, and a SyntaxError's location. Their own module, so that
reading a block (structure.py) and the records it describes (model.py) import it and not each
other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Frame:
    file: str
    line: int | None
    function: str
    code: str | None  # the statement as printed, stripped; lines joined with "\n"; no carets

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function, "code": self.code}


@dataclass(slots=True)
class Location:
    """Where a SyntaxError (or IndentationError) is: `File "x.py", line 2` with no function,
    then the code and its caret. Python prints it after the frames; it is not a frame."""

    file: str
    line: int | None
    code: str | None
    function = None  # read like a frame's where one is shown, but it belongs to no function

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "code": self.code}
