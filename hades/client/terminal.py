"""How the client commands write: colour and a live one-line progress display on a terminal, plain text when piped.

Piped output is exactly the text a script expects (no escape codes, no progress line); ``NO_COLOR`` turns colour
off on a terminal too (https://no-color.org).
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from hades.core.logs import LogEntry

_COLOURS = {"Succeeded": "32", "Failed": "31", "Stopped": "33", "Running": "36", "Queued": "34"}
_CLEAR_LINE = "\r\x1b[K"


class Display:
    """Where log lines, statuses and the progress line go."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.live = self.out.isatty()
        self.colour = self.live and "NO_COLOR" not in os.environ
        self._progress = ""

    def paint(self, text: str, code: str) -> str:
        """``text`` in an SGR colour on a colour terminal, as it is otherwise."""
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour else text

    def status(self, status: str) -> str:
        """A job status, coloured by what it means."""
        return self.paint(status, _COLOURS.get(status, "0"))

    def say(self, text: str, error: bool = False) -> None:
        """One line on stdout (or stderr), below the progress line, which is drawn again after it."""
        self._clear()
        print(text, file=self.err if error else self.out, flush=True)
        self._draw()

    def log(self, entry: LogEntry) -> None:
        """One line of the job's output, on the stream it was written to."""
        self.say(entry.message, error=entry.output_stream == "stderr")

    def progress(self, text: str) -> None:
        """Replace the progress line (only on a terminal)."""
        if self.live:
            self._clear()
            self._progress = text
            self._draw()

    def done(self) -> None:
        """Remove the progress line for good."""
        self._clear()
        self._progress = ""

    def _clear(self) -> None:
        if self.live and self._progress:
            self.out.write(_CLEAR_LINE)
            self.out.flush()

    def _draw(self) -> None:
        if self.live and self._progress:
            self.out.write(self.paint(self._progress, "2"))
            self.out.flush()
