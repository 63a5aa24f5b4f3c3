"""The interactive loop on prompt_toolkit: a thin layer over Shell.execute."""

from __future__ import annotations

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import WordCompleter

from .registry import command_words


def repl(shell, banner: str, session: PromptSession | None = None) -> int:
    print(banner)
    print("type `help` for the commands, `quit` or Ctrl-D to leave")
    prompt = session or PromptSession(completer=WordCompleter(command_words(), sentence=True))
    while not shell.quitting:
        try:
            line = prompt.prompt("cush> ")
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        shell.execute(line)
    left = shell.close()
    if left:
        print("released: " + ", ".join(left))
    return 0
