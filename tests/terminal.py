"""The installed shell in a pseudo-terminal of a given size, read through a terminal emulator (pyte) as a person
sees it: what is on the screen now, and what scrolled off above. Tests wait for the screen, never sleep."""

from __future__ import annotations

import os
import sys
import time

import pytest

pexpect = pytest.importorskip("pexpect")
pyte = pytest.importorskip("pyte")

F1, F2, ESC_ENTER = "\x1bOP", "\x1bOQ", "\x1b\r"


def paste(text: str) -> str:
    """The keys of a bracketed paste (the terminal wraps what is pasted in these markers)."""
    return f"\x1b[200~{text}\x1b[201~"


class Terminal:
    def __init__(self, tmp_path, rows: int, cols: int, args=("--backend", "sim"), env: dict | None = None):
        self.rows, self.cols, self.tmp = rows, cols, tmp_path
        self.screen = pyte.HistoryScreen(cols, rows, history=5000)
        self.stream = pyte.Stream(self.screen)
        self.screen.write_process_input = lambda answer: self.child.send(answer)  # as a terminal answers a CPR
        environ = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "cfg"), XDG_STATE_HOME=str(tmp_path / "state"),
                       TERM="xterm", NO_COLOR="1", LESS="")
        environ.update(env or {})
        for name in [k for k, v in environ.items() if v is None]:  # None: not set at all
            del environ[name]
        for name in ("COLUMNS", "LINES", "PROMPT_TOOLKIT_NO_CPR"):
            environ.pop(name, None)
        self.child = pexpect.spawn(sys.executable, ["-m", "cudashell", *args], env=environ, encoding="utf-8",
                                   timeout=30, dimensions=(rows, cols), cwd=str(tmp_path))
        self.wait(lambda t: "cush>" in t.display)

    def _pump(self, seconds: float) -> None:
        try:
            data = self.child.read_nonblocking(65536, timeout=seconds)
        except pexpect.TIMEOUT:
            return
        except pexpect.EOF:
            self.ended = True
            return
        self.raw += data
        self.stream.feed(data)

    ended = False
    raw = ""  # every character the shell wrote, escapes included: what passed over the screen, not only what stays

    @property
    def display(self) -> str:
        """The screen as it is now, rows joined by newlines, trailing blanks dropped."""
        return "\n".join(row.rstrip() for row in self.screen.display)

    @property
    def lines(self) -> list[str]:
        """Every row the session has shown, the ones scrolled off the top first."""
        above = ["".join(ch.data for ch in (row[x] for x in range(self.cols))).rstrip()
                 for row in self.screen.history.top]
        shown = [row.rstrip() for row in self.screen.display]
        while shown and not shown[-1]:
            shown.pop()
        return above + shown

    def last_run(self) -> tuple[str, list[str]]:
        """The last line run (what its prompt row shows) and the rows it printed, up to the prompt now showing."""
        rows = self.lines
        prompts = [i for i, row in enumerate(rows) if row.startswith("cush>")]
        start, end = prompts[-2], prompts[-1]
        return rows[start][len("cush>"):].strip(), rows[start + 1:end]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def wait(self, ready, timeout: float = 30) -> Terminal:
        """Read the terminal until ready(self) holds; fail with the screen when it does not in time."""
        deadline = time.monotonic() + timeout
        while not ready(self):
            if time.monotonic() > deadline or self.ended:
                pytest.fail(f"the screen did not become ready ({'the shell ended' if self.ended else 'timeout'}):\n"
                            + self.display)
            self._pump(0.05)
        return self

    def send(self, keys: str) -> Terminal:
        self.child.send(keys)
        return self

    def run(self, line: str, timeout: float = 60) -> Terminal:
        """Type a line and Enter, then wait until the output has come and the prompt is back, empty."""
        before = self.text.count("cush>")
        self.send(line + "\r")
        return self.wait(lambda t: t.text.count("cush>") > before and t.prompt_line() == "", timeout)

    def prompt_line(self) -> str | None:
        """What is typed at the prompt on screen now (the last `cush>` row), or None with no prompt showing."""
        rows = [row for row in self.screen.display if row.startswith("cush>")]
        return rows[-1][len("cush>"):].strip() if rows else None

    def prompt_row(self) -> str | None:
        rows = [row.rstrip() for row in self.screen.display if row.startswith("cush>")]
        return rows[-1] if rows else None

    def cursor_row(self) -> str:
        return self.screen.display[self.screen.cursor.y].rstrip()

    def toolbar(self) -> str:
        """The bottom toolbar: prompt_toolkit draws it on the last row it uses, below the prompt."""
        return self.lines[-1]

    def close(self) -> int:
        if not self.ended:
            self.send("\x03")  # whatever is typed is cancelled
            self.wait(lambda t: t.prompt_line() == "")
            self.send("\x04")
            self.wait(lambda t: t.ended, 30)
        self.child.close()
        return self.child.exitstatus
