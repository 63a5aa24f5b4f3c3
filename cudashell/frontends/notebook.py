"""`%load_ext cudashell`: the shell in a Jupyter or Colab notebook. `%%cush` runs a cell as a .cush script and
`%cush` one line, both in the notebook's one session (later cells see earlier buffers); results show as HTML
tables and text with their measured/modeled label, the timeline, benches and profile also as pictures. A thin
layer over `Shell`, like the REPL and the script runner: no command logic here. Its output goes to an `Environment`
(by default one that writes to the kernel's stdout and stderr of the moment)."""

from __future__ import annotations

import io
import shlex
from html import escape
from pathlib import Path

import numpy as np
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import HTML, Image, display

from ..backends.choice import open_backend
from ..errors import ShellError
from ..language.confinement import Confinement
from ..output import figures, render
from ..output.results import Result
from .environment import Environment
from .frame import ShellOptions
from .shell import Shell


class Shown:
    """A result as the notebook shows it — HTML, plain text where HTML is not rendered — and its data for Python."""

    def __init__(self, result: Result):
        self.kind, self.data = result.kind, result.data
        self._result = result

    def __getitem__(self, key):
        return self.data[key]

    def _repr_html_(self) -> str:
        return render.html(self._result)

    def __repr__(self) -> str:
        return render.human(self._result, "simple", 100)


class SessionView:
    """The session, plus its buffers' bytes as NumPy arrays: `cush.session.array("p0", "float32")`."""

    def __init__(self, shell: Shell):
        self._shell = shell

    def __getattr__(self, name):
        return getattr(self._shell.session, name)

    def array(self, name: str, dtype: str = "uint8") -> np.ndarray:
        """A copy of a buffer's bytes as it is now (after the GPU's finished work; device memory is copied back)."""
        session, backend = self._shell.session, self._shell.backend
        buf = session.buffer(name)
        session.settle(backend)
        dt = np.dtype(dtype)
        return backend.read(buf, 0, buf.size - buf.size % dt.itemsize).view(dt)


class Cush:
    """The notebook's one shell, made at the first `%cush`/`%%cush` with its options (`--backend`, `--sim-profile`);
    other options later start a fresh session and say so."""

    def __init__(self, env: Environment | None = None):
        self.env = env or Environment.live()  # the kernel swaps stdout and stderr per cell
        self.shell: Shell | None = None
        self.options: tuple = ()
        self.shown: list[Shown] = []
        self.quiet = False  # while a line magic runs: its results are its value, shown by the notebook
        self.told_no_pictures = False  # without matplotlib a result's picture is left out: said once a session

    @property
    def session(self) -> SessionView:
        return SessionView(self._shell(None, None))

    def _shell(self, backend: str | None, profile: str | None) -> Shell:
        wanted = (backend or "auto", profile)
        if self.shell is not None and (backend is None and profile is None or wanted == self.options):
            return self.shell
        chosen, reason = open_backend(wanted[0], profile)  # first: a switch that fails keeps the session there is
        if self.shell is not None:
            self.shell.close()
            print(f"cudashell: a fresh session on backend {wanted[0]} (the previous one is released)",
                  file=self.env.stdout)
        options = ShellOptions(display=self._display,
                               echo_scripts=True,  # `%cush demo …` shows each command it runs, as the prompt does
                               advice=True,  # notes as the cells run, as at the prompt
                               state_dir=self.env.state_dir,  # a lesson's progress, kept between notebook sessions
                               # a notebook is teaching material too: its cells write only inside its folder
                               confinement=Confinement(Path.cwd(), who="a notebook cell"))
        self.shell, self.options = Shell(chosen, reason, options, self.env), wanted
        display(HTML(f"<small>cudashell · backend {escape(reason)}</small>"))
        return self.shell

    def _display(self, result: Result) -> None:
        shown = Shown(result)
        self.shown.append(shown)
        if self.quiet:
            return
        display(shown)
        picture = None
        try:
            picture = result.figure()
        except ImportError:  # no matplotlib: the table is there, and the notebook says once what draws the rest
            if not self.told_no_pictures:
                self.told_no_pictures = True
                print("cudashell: this result has a picture, left out: matplotlib draws it — install cudashell with "
                      "its notebook extra, as the README shows, or `pip install matplotlib`; tables show meanwhile",
                      file=self.env.stdout)
            return
        if picture is not None:
            png = io.BytesIO()
            try:
                picture.savefig(png, format="png", dpi=90, bbox_inches="tight")
            finally:
                figures.close(picture)
            display(Image(data=png.getvalue(), format="png"))

    def run(self, text: str, options, cell: bool) -> Shown | None:
        try:
            shell = self._shell(options.backend, options.sim_profile)
        except ShellError as e:
            print(render.error_line(e), file=self.env.stderr)
            return None
        self.shown = []
        try:
            with shell.using(keep_going=options.keep_going, debug=options.debug):  # this cell's
                return self._run(shell, text, cell)
        finally:
            if shell.quitting:  # `quit` ends this session; the next %cush starts a fresh one, and says so
                shell.close()
                self.shell = None
                print("cudashell: the session ended (quit); the next %cush starts a fresh one", file=self.env.stdout)

    def _run(self, shell: Shell, text: str, cell: bool) -> Shown | None:
        if cell:
            shell.run_text(text, "cell")
            return None
        self.quiet = True  # a line's last result is its value: shown once, as Out[n]
        try:
            shell.execute(text)
        finally:
            self.quiet = False
        results = [s for s in self.shown if s.kind != "note"]  # an advice note is shown, never the value
        for shown in results[:-1] + [s for s in self.shown if s.kind == "note"]:
            display(shown)
        return results[-1] if results and shell.last_error is None else None


@magics_class
class CushMagics(Magics):
    def __init__(self, shell, state: Cush):
        super().__init__(shell)
        self.state = state

    @magic_arguments()
    @argument("--backend", choices=("auto", "sim", "cuda"), help="where commands run (default: auto)")
    @argument("--sim-profile", help="the simulator's GPU: a built-in profile name or a JSON file")
    @argument("--keep-going", action="store_true", help="in a cell, go on after a failed command")
    @argument("--debug", action="store_true", help="show Python tracebacks")
    @argument("command", nargs="*", help="(line magic) the cudashell command")
    @line_cell_magic
    def cush(self, line: str, cell: str | None = None):
        """%cush COMMAND: one line; its result is the value. %%cush [options]: the cell is a .cush script."""
        try:
            words = shlex.split(line, posix=True) if line.strip().startswith("--") else []
        except ValueError as e:  # `%cush --debug "x`: one line, as every error is
            print(render.error_line(ShellError("USAGE", f"the options cannot be read: {e}",
                                               "close the quote, or quote the whole command")),
                  file=self.state.env.stderr)
            return None
        options = parse_argstring(CushMagics.cush, " ".join(shlex.quote(w) for w in words))
        command = line if not words else " ".join(options.command)
        return self.state.run(cell if cell is not None else command, options, cell is not None)


def load_ipython_extension(ipython, env: Environment | None = None) -> None:
    """`%load_ext cudashell`: registers the magics and puts `cush` (the notebook's shell) in the namespace."""
    cush = Cush(env)
    ipython.register_magics(CushMagics(ipython, cush))
    ipython.push({"cush": cush})


def unload_ipython_extension(ipython) -> None:
    cush = ipython.user_ns.get("cush")
    if isinstance(cush, Cush) and cush.shell is not None:
        cush.shell.close()
