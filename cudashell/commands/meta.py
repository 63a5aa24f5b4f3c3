"""The shell's own commands: help, device, echo, history, save, set, run, quit, and expect."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import NotRequired, TypedDict

from ..backends.profile import BUILTIN, Profile
from ..errors import ShellError, usage
from ..export.cemit import comment, cstr, inside
from ..language.grammar import Arg, Flag, Opt, split_commands
from ..language.registry import GROUPS, c_writer, command, lookup, parse_segment, specs
from ..model.settings import SETTABLE
from ..output.render import fmt_seconds, wrap
from ..output.results import (
    Block,
    Edit,
    Expectation,
    Message,
    Output,
    Quit,
    Repeat,
    Result,
    RunScript,
    Settings,
)
from ..sizes import format_size_exact
from ..teaching.shipped import DEMO_DIR, demos
from .checks import GRADED, POINTS, check_writable, write_file


def saved(text: str) -> bool:
    """Whether `save` keeps a history line: every command in it is part of the experiment (Spec.saved)."""
    return all(parse_segment(seg).spec.saved for seg in split_commands(text))


def spec_help(spec) -> dict:
    return {"name": spec.name, "syntax": spec.syntax(), "summary": spec.summary, "example": spec.example,
            "cuda": spec.cuda, "details": spec.details, "aliases": list(spec.aliases)}


FIRST_STEPS = (  # what `help` and the banner point a newcomer to first
    ("lesson list", "exercises, checked as you go: `lesson pinned` first"),
    ("demo streams", "watch an experiment, explained (`demo`: all)"),
    ("kernel load K.cu", "your own kernel, then `launch K BUFFER`"),
    ("run examples/tour.cush", "the five-minute tour (in the project's folder)"),
)


@command("help", "session", "what to do first and the commands by group; `help all`, `help GROUP` or "
         "`help COMMAND` for more", "help memcpy", "(none)",
         args=(Arg("COMMAND", "command", optional=True, many=True),), exported=False, saved=False,
         details="`help` alone fits one screen: the first things to do, and each group's commands by name; "
                 f"`help all` lists every command with what it does, `help GROUP` ({', '.join(GROUPS)}) one "
                 "group's, `help COMMAND` (or `COMMAND ?`) one command's syntax, example and CUDA call.")
def help_(session, backend, args):
    words = args.get("COMMAND")
    groups = {g: [] for g in GROUPS}
    for s in specs():  # in group order, by name: one pass
        groups[s.group].append({"name": s.name, "summary": s.summary})
    if not words or [w.lower() for w in words] == ["all"]:
        return Help({"groups": groups, "brief": not words})
    group = words[0].lower()
    if len(words) == 1 and group in groups and lookup(group) is None:  # `streams`, `kernels`: the commands
        return Help({"groups": {g: cmds if g == group else [] for g, cmds in groups.items()}})
    name = " ".join(words).lower()
    spec = lookup(name)
    several = [lookup(w) for w in words]
    if spec is None and len(words) > 1 and all(several):  # `help memcpy memset`: each of them
        return CommandHelps({"commands": [spec_help(s) for s in dict.fromkeys(several)]})
    family = [{"name": s.name, "summary": s.summary} for s in specs() if s.name.startswith(name + " ")]
    if spec is None and family:
        return Help({"groups": {name: family}})
    if spec is None:
        owners = [s for s in specs() if name in [o.keyword for o in s.opts] + [f.word for f in s.flags]]
        if owners:  # `help lang`: a word of other commands, not one itself
            shown = next((s for s in owners if f" {name}" in s.example), owners[0])
            raise ShellError("UNKNOWN_COMMAND", f"'{name}' is not a command: it is a word of "
                             + ", ".join(f"`{s.name}`" for s in owners[:6]) + (", …" if len(owners) > 6 else ""),
                             (f"as in `{shown.example}`; " if f" {name}" in shown.example else "")
                             + f"`help {shown.name}` says where it goes", args.col("COMMAND"))
        close = difflib.get_close_matches(name, [s.name for s in specs()], n=1)
        raise ShellError("UNKNOWN_COMMAND", f"no command '{name}'",
                         f"did you mean `{close[0]}`?" if close else "`help` lists them", args.col("COMMAND"))
    return CommandHelp(spec_help(spec))


@command("device", "session", "show the GPU (or simulated GPU) and the attributes that govern memory",
         "device", "cudaGetDeviceProperties (cuDeviceGetAttribute)", exported=False)
def device(session, backend, args):
    return DeviceChosen({"backend": backend.name, "timing": backend.timing_label, **backend.info.as_dict()})


@command("echo", "scripts", "print text", "echo pinned copies next", "(none)",
         args=(Arg("TEXT", "rest", optional=True),), saved=False)
def echo(session, backend, args):
    return Echo({"text": args.get("TEXT", "")})


@c_writer("echo")
def c_echo(w, a, i, text):
    if a.get("TEXT"):
        w.emit(f'printf("%s\\n", {cstr(a.get("TEXT"))});', i)


@command("history", "session", "the commands run so far", "history", "(none)", exported=False, saved=False)
def history(session, backend, args):
    return History({"entries": [{"n": i + 1, "text": e.text, "ok": e.ok, "code": e.code}
                                          for i, e in enumerate(session.history)]})


@command("edit", "session", "open the last command, or FILE, in your $EDITOR; what you save waits at the prompt",
         "edit", "(none)", args=(Arg("FILE", "written-file", optional=True),), exported=False, saved=False,
         details="As pgcli's \\e and bash's fc: the edited command comes back to the prompt, Enter runs it. With FILE "
                 "(made if missing) the prompt then holds `run FILE`. F2 or Ctrl-X Ctrl-E opens the line being typed "
                 "instead. The editor is $VISUAL or $EDITOR (else editor, nano or vi). At the prompt only.")
def edit(session, backend, args):
    path = args.get("FILE")
    last = next((e.text for e in reversed(session.history) if not e.text.startswith("edit")), "")
    what = path if path else (f"`{last}`" if last else "an empty command")
    return Message({"text": f"edited {what}: it waits at the prompt, Enter runs it"},
                   action=Edit("" if path else last, path, args.col("FILE")))


@command("save", "scripts", "save the successful commands so far as a .cush script", "save session.cush",
         "(none)", args=(Arg("FILE", "written-file"),), flags=(Flag("force"),), exported=False, saved=False,
         details="An existing FILE is replaced only with `force` (a hand-written script is not lost to a typo).")
def save(session, backend, args):
    path = Path(args.get("FILE"))
    check_writable(path, "force" in args.flags, args.col("FILE"))
    lines = [e.text for e in session.history if e.ok and saved(e.text)]
    write_file(path, "# saved by cudashell\n" + "".join(line + "\n" for line in lines), args.col("FILE"))
    return Message({"text": f"saved {len(lines)} command{'s' if len(lines) != 1 else ''} to {path}", "path": str(path),
                              "commands": len(lines)})


def _setting_values(session, words: list[str], index: int) -> list[tuple[str, str]]:
    """`set KEY `: the values that setting takes."""
    setting = SETTABLE.get(words[1].lower()) if len(words) > 1 else None
    return [(w, "value") for w in setting.words()] if setting else []


@command("set", "session", f"show or change a setting ({', '.join(SETTABLE)})",
         "set count 32",
         "(none)",
         args=(Arg("KEY", "key", optional=True), Arg("VALUE", "word", optional=True, complete=_setting_values)),
         details="count: elements `show` prints by default; format: table, json or csv output; tablefmt: the "
                 "table style (any tabulate format); pinlimit: how much may be page-locked in all (auto: half of "
                 "host memory, and never past a finite RLIMIT_MEMLOCK on a GPU); gpu-timeout: seconds one wait on "
                 "the GPU may take before the shell gives the GPU up (off by default; Ctrl-C does it by hand), "
                 "after which `reset` brings the session back; pager: at the prompt, output taller than the screen goes "
                 "through the config's pager (on) or is written as it is (off); expanded: on, off or auto (pgcli's \\x: "
                 "tables one field a line; auto: only those too wide for the terminal).", exported=False)
def set_(session, backend, args):
    key, value = args.get("KEY"), args.get("VALUE")
    if key is None:
        # what `set KEY` takes; the width the prompt keeps and a demo's language are the shell's own
        return Settings({"settings": {k: v for k, v in session.settings.items() if k in SETTABLE}})
    key = key.lower()
    if key not in SETTABLE:
        close = difflib.get_close_matches(key, list(SETTABLE), n=1)
        raise usage(f"no setting '{key}'", args.col("KEY"),
                    f"did you mean `{close[0]}`?" if close else "settings: " + ", ".join(SETTABLE))
    if value is None:
        return Settings({"settings": {key: session.settings[key]}})
    setting = SETTABLE[key]
    if not setting.check(value):
        raise usage(f"{key} must be {setting.accepts}, got '{value}'", args.col("VALUE"))
    session.settings[key] = setting.cast(value)
    if key == "gpu-timeout":
        backend.gpu_timeout = None if value == "off" else session.settings[key]
    return Settings({"settings": {key: session.settings[key]}})


@command("output", "session", "send the results that follow to a file (appended), or `output off`",
         "output results.txt", "(none)", args=(Arg("FILE", "file-or-off"),),
         details="Like pgcli's \\o: every result after it is appended to FILE in the current format (`set format "
                 "table|json|csv`); errors still show on the screen. `output off` writes to the screen again.", exported=False)
def output(session, backend, args):
    path = args.get("FILE")
    where = None if path == "off" else str(session.script_dir / path) if not path.startswith("/") else path
    return Message({"text": f"results go to {path}" if path != "off" else "results go to the screen",
                              "path": where, "col": args.col("FILE")}, action=Output(where, args.col("FILE")))


@command("require profile", "scripts", "stop a script, saying so, unless the simulator runs this profile",
         "require profile one-copy-engine", "(none: a guard for a script whose claim holds on one machine)",
         args=(Arg("NAME", choices=("h100", *BUILTIN)),), exported=False, saved=False,
         details="A script whose expectations hold only on a machine a built-in simulator profile models (one copy "
                 "engine, no UVA, two GPUs) says so on its first line: run elsewhere, it stops there with "
                 "NEEDS_PROFILE and the command line that runs it, instead of failing an `expect` later. Any "
                 "profile with the figures that NAME sets holds (a calibrated file of a one-engine GPU too).")
def require_profile(session, backend, args):
    name = args.get("NAME")
    running = backend.capabilities.profile
    wanted = Profile.load(name)
    keys = [k for k in BUILTIN.get(name, {}) if k != "name"]
    if running is not None and all(getattr(running, k) == getattr(wanted, k) for k in keys):
        return Message({"text": f"profile {name}: {running.name}"})
    raise ShellError("NEEDS_PROFILE", f"this script needs the simulator's {name} profile ({wanted.name}); "
                     + (f"this is {running.name}" if running is not None else "this is a GPU"),
                     f"run it as `cudashell --backend sim --sim-profile {name} FILE.cush`", args.col("NAME"))


@command("run", "scripts", "run a .cush script (paths relative to the calling script)", "run demo.cush",
         "(none)", args=(Arg("FILE", "file"),), exported=False, saved=False, narrates=True)
def run(session, backend, args):
    return ScriptRun({"path": args.get("FILE"), "col": args.col("FILE")},
                  action=RunScript(args.get("FILE"), args.col("FILE")))


@command("quit", "session", "release everything and leave", "quit", "cudaFree… then cuCtxDestroy",
         aliases=("exit",), exported=False, saved=False)
def quit_(session, backend, args):
    return QuitResult({}, action=Quit())


def _previous(session):
    last = session.last()
    if last is None:
        raise ShellError("EXPECT_FAILED", "nothing ran before this expect", "put expect after a command")
    return last


@command("expect ok", "scripts", "check that the command before succeeded", "expect ok", "(none)", opts=(POINTS,),
         details=GRADED, exported=False, saved=False)
def expect_ok(session, backend, args):
    last = _previous(session)
    if not last.ok:
        raise ShellError("EXPECT_FAILED", f"`{last.text}` failed with {last.code}")
    return Expectation({"expected": "ok", "passed": True})


@command("expect error", "scripts", "check that the command before failed with CODE",
         "expect error CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "(none)", args=(Arg("CODE", "code"),), opts=(POINTS,),
         details="In a script a failing command stops it unless the next command is a matching expect error. " + GRADED,
         exported=False, saved=False)
def expect_error(session, backend, args):
    last = _previous(session)
    code = args.get("CODE").upper()
    if last.ok:
        raise ShellError("EXPECT_FAILED", f"expected {code}, but `{last.text}` succeeded", None, args.col("CODE"))
    if last.code != code:
        raise ShellError("EXPECT_FAILED", f"expected {code}, but `{last.text}` failed with {last.code}",
                         None, args.col("CODE"))
    return Expectation({"expected": code, "passed": True})


@command("expect faster", "scripts", "check that the time between two events is shorter than between two others",
         "expect faster b0 b1 than n0 n1", "cudaEventElapsedTime",
         args=(Arg("A1", "event"), Arg("A2", "event"), Arg("THAN", choices=("than",)), Arg("B1", "event"),
               Arg("B2", "event")), opts=(POINTS,), details=GRADED, exported=False, saved=False)
def expect_faster(session, backend, args):
    a = backend.event_elapsed(session.event(args.get("A1"), args.col("A1")).handle,
                              session.event(args.get("A2"), args.col("A2")).handle)
    b = backend.event_elapsed(session.event(args.get("B1"), args.col("B1")).handle,
                              session.event(args.get("B2"), args.col("B2")).handle)
    if not a < b:
        raise ShellError("EXPECT_FAILED", f"{args.get('A1')}→{args.get('A2')} took {a * 1e3:.3f} ms, not less than "
                         f"{args.get('B1')}→{args.get('B2')} ({b * 1e3:.3f} ms) ({backend.timing_label})",
                         None, args.col("A1"))
    return Expectation({"expected": "faster", "passed": True, "ms": [a * 1e3, b * 1e3],
                             "speedup": b / a if a else None, "timing": backend.timing_label})


@command("repeat", "scripts", "run commands N times, quietly; GPU-only blocks run at the driver's pace",
         "repeat 1000 <<< memcpy h2d p0 d0 4 >>>", "(a loop in the host program)",
         args=(Arg("TIMES", "count"), Arg("COMMANDS", "commands")), flags=(Flag("shell"),),
         details="The commands go between <<< and >>>; their output is not printed, a failure stops the loop and "
                 "is reported. Round 1 runs through the shell, checked as typed. When the block is only GPU work "
                 "(memcpy, memset, launch, prefetch, event record, wait, sync), the other rounds run on the GPU "
                 "side as a loop of driver calls, with no shell in between, and the repeat reports their host time "
                 "per round (median and spread) and the GPU time from first start to last end; it waits for that "
                 "work to finish. `shell` runs every round through the shell instead (what a script of N copies "
                 "would cost).")
def repeat(session, backend, args):
    n = args.get("TIMES")
    if not 1 <= n <= 1_000_000:
        raise usage("repeat 1..1000000 times", args.col("TIMES"))
    block = Repeat(n, args.get("COMMANDS"), args.col("COMMANDS"), "shell" in args.flags)
    return Repeated({"times": n, "commands": block.commands, "col": block.col, "shell": block.shell},
                  action=block)


@c_writer("repeat")
def c_repeat(w, a, i, text):
    w.emit(f"for (int round = 0; round < {a.get('TIMES')}; round++) {{", i)
    with inside(text):
        w.command(a.get("COMMANDS").replace("\n", ";"), i + 1)
    w.emit("}", i)


@command("if gpus", "scripts", "run commands only where the machine has at least N GPUs (a demo's two-GPU part)",
         "if gpus 2 <<< device use 1; alloc device 64MB as d1 >>>", "(a branch in the host program on cudaGetDeviceCount)",
         args=(Arg("N", "count"), Arg("COMMANDS", "commands")),
         details="The commands between <<< and >>> run as typed ones do, shown one by one, when `devices` lists N "
                 "GPUs or more (on the simulator: the profile's, two with `--sim-profile two-h200`); otherwise the "
                 "block is skipped and says so. The first command that fails stops the block and the script.")
def if_gpus(session, backend, args):
    n, have = args.get("N"), len(backend.devices()["devices"])
    runs = have >= n
    text = (f"the block ran: {have} GPUs here (it needs {n})" if runs else
            f"skipped: the block needs {n} GPUs and this machine has {have}")
    return Message({"text": text, "gpus": have, "needs": n, "runs": runs, "commands": args.get("COMMANDS"),
                              "col": args.col("COMMANDS")},
                  action=Block(args.get("COMMANDS"), args.col("COMMANDS")) if runs else None)


@c_writer("if gpus")
def c_if_gpus(w, a, i, text):
    """The block in a runtime check of cudaGetDeviceCount. From history (`replay`) a block that ran is written
    from the commands it ran; here the block's own text: one that ran (explain), or one the session skipped
    (then what it would make is forgotten after it, as the session never made it)."""
    n = a.get("N")
    ran = w.gpus_here is None or w.gpus_here >= n
    if ran:
        w.open_if(n, i)
        with inside(text):
            w.command(a.get("COMMANDS").replace("\n", ";"), i + 1)
        w.close_if(i)
        return
    keep = w.knowledge()
    mark = len(w.body)
    try:
        w.open_if(n, i)
        w.command(a.get("COMMANDS").replace("\n", ";"), i + 1)
        w.close_if(i)
    except ShellError:  # cannot be written without the names the shell would have given: it did nothing here
        del w.body[mark:]
        w.depth = keep["depth"]
        w.emit(f"// {comment(text)}: skipped in the session ({w.gpus_here} GPU"
               f"{'s' * (w.gpus_here != 1)}), and here", i)
    w.restore(keep)


@command("say", "scripts", "narration in one language: printed when it is the session's (`demo … lang zh`)",
         "say en Pinned memory is page-locked.", "(none)",
         args=(Arg("LANG", choices=("en", "zh")), Arg("TEXT", "rest")), echoed=False)
def say(session, backend, args):
    shown = args.get("LANG") == session.settings["lang"]
    return Said({"text": args.get("TEXT"), "lang": args.get("LANG"), "shown": shown})


@c_writer("say")
def c_say(w, a, i, text):
    if a.get("TEXT") and a.get("LANG") == w.lang:
        w.emit(f'printf("%s\\n", {cstr(a.get("TEXT"))});', i)


@command("demo", "scripts", "list the demos, or run one (narrated, self-checking)", "demo pinned-vs-pageable lang zh",
         "(a shipped .cush script)", args=(Arg("NAME", "demo", optional=True),),
         opts=(Opt("lang", Arg("L", choices=("en", "zh"))),),
         details="Each demo reproduces an experiment of the source articles; its `expect` lines check the "
                 "article's conclusion (on the simulator: the modeled figures, and it says so). A demo runs in a "
                 "scope of its own — its own names, on the same GPU and settings — and everything it made is "
                 "released at its end: your buffers, streams and events are as you left them. The .cush files "
                 "are in the package's demos/ folder: copy one to change it.", exported=False, narrates=True)
def demo(session, backend, args):
    name = args.get("NAME")
    available = demos()
    if name is None:
        return DemoList({"demos": [{"name": k, "title": v} for k, v in available.items()],
                                "folder": str(DEMO_DIR)})
    if name not in available:
        close = difflib.get_close_matches(name, list(available), n=1)
        raise ShellError("NO_SUCH_DEMO", f"no demo named '{name}'",
                         f"did you mean `{close[0]}`?" if close else "`demo` lists them", args.col("NAME"))
    if session.held is not None:  # its session is its own, but the GPU's streams are the ones you hold
        raise ShellError("STREAMS_HELD", "a demo cannot run while your streams are held: it would wait on them",
                         "`release` first", args.col("NAME"))
    settings = {"lang": args.get("L")} if args.get("L") else {}
    path = str(DEMO_DIR / f"{name}.cush")
    return ScriptRun({"path": path, "col": args.col("NAME"), "scope": settings},
                  action=RunScript(path, args.col("NAME"), settings))


# ------------------------------------------------------------------ the results of these commands
class DemosDataDemosItem(TypedDict):
    name: str
    title: str


class DemosData(TypedDict):
    demos: list[DemosDataDemosItem]
    folder: str  # where the scripts are: copy one to change it


class DemoList(Result, kind="demos"):
    Data = DemosData

    def text(self):
        d = self.data
        return ([f"  {x['name']:<20} {x['title']}" for x in d["demos"]]
                + [f"run one with `demo NAME` (`lang zh` for Chinese narration); the scripts are in {d['folder']}"])


class DeviceData(TypedDict):
    backend: str
    timing: str
    name: str
    ordinal: int
    total_mem: int
    compute_capability: str
    pci_bus_id: str
    unified_addressing: bool
    can_map_host_memory: bool
    pageable_memory_access: bool
    managed_memory: bool
    concurrent_managed_access: bool
    async_engine_count: int
    concurrent_kernels: bool


class DeviceChosen(Result, kind="device"):
    Data = DeviceData

    def text(self):
        d = self.data
        keys = [k for k in d if k not in ("backend", "timing", "name")]
        out = [f"{d['name']} — backend {d['backend']}, timings {d['timing']}"]
        return out + [f"  {k:<26} {format_size_exact(d[k]) if k == 'total_mem' else d[k]}" for k in keys]


class EchoData(TypedDict):
    text: str


class Echo(Result, kind="echo"):
    Data = EchoData
    prose = True

    def text(self):
        d = self.data
        return [d["text"]]


class HelpDataGroupsMemoryItem(TypedDict):
    name: str
    summary: str


class HelpDataGroupsDataItem(TypedDict):
    name: str
    summary: str


class HelpDataGroupsCopiesItem(TypedDict):
    name: str
    summary: str


class HelpDataGroupsStreamsItem(TypedDict):
    name: str
    summary: str


class HelpDataGroupsKernelsItem(TypedDict):
    name: str
    summary: str


class HelpDataGroupsScriptsItem(TypedDict):
    name: str
    summary: str


class HelpDataGroupsSessionItem(TypedDict):
    name: str
    summary: str


class HelpDataGroups(TypedDict):
    memory: list[HelpDataGroupsMemoryItem]
    data: list[HelpDataGroupsDataItem]
    copies: list[HelpDataGroupsCopiesItem]
    streams: list[HelpDataGroupsStreamsItem]
    kernels: list[HelpDataGroupsKernelsItem]
    scripts: list[HelpDataGroupsScriptsItem]
    session: list[HelpDataGroupsSessionItem]


class HelpData(TypedDict):
    groups: HelpDataGroups
    brief: NotRequired[bool]  # `help` alone: shown as the first things to do and the commands' names by group


class Help(Result, kind="help"):
    Data = HelpData
    prose = True

    def text(self):
        return [line for line, _ in self._rows(0)]

    def lines(self, tablefmt: str = "simple", width: int = 0) -> list[str]:
        """Each row wrapped under its second column (a long summary continues below itself)."""
        return [part for line, hang in self._rows(width) for part in wrap([line], width, indent=" " * hang)]

    def _rows(self, width: int) -> list[tuple[str, int]]:
        """Its lines, each with the indent a wrapped continuation takes."""
        if self.data.get("brief"):
            return self._brief(width)
        out = []
        for group, cmds in self.data["groups"].items():
            if cmds:
                out.append((f"{group}:", 4))
                name = max(len(c["name"]) for c in cmds)
                out += [(f"  {c['name']:<{name}}  {c['summary']}", name + 4) for c in cmds]
        return out + [("`help COMMAND` shows its syntax, an example and the CUDA call behind it.", 4)]

    def _brief(self, width: int) -> list[tuple[str, int]]:
        """One screen (14 lines at 80×24, where the prompt keeps 8 rows for its menu): the first things to do,
        then each group's commands by their first word, on one line each (`…` where the terminal is narrower)."""
        name = max(len(c) for c, _ in FIRST_STEPS)
        out = [("first things to do:", 4), *((f"  {c:<{name}}  {what}", name + 4) for c, what in FIRST_STEPS),
               ("commands by group (`help all`: what each does; `help GROUP`: one group):", 4)]
        for group, cmds in self.data["groups"].items():
            line = f"  {group:<8}  "
            words = list(dict.fromkeys(c["name"].split()[0] for c in cmds))
            for i, w in enumerate(words):
                more = ", …" if i + 1 < len(words) else ""
                if width and len(line) + len(w) + len(more) > width:
                    line = line.rstrip(", ") + ", …"
                    break
                line += w + (", " if i + 1 < len(words) else "")
            out.append((line, 12))
        return out + [("`help COMMAND` (or `COMMAND ?`): its syntax, an example, the CUDA call", 4)]


class HelpCommandData(TypedDict):
    name: str
    syntax: str
    summary: str
    example: str
    cuda: str
    details: str
    aliases: list[str]


class CommandHelp(Result, kind="help_command"):
    Data = HelpCommandData
    prose = True

    def text(self):
        d = self.data
        out = [d["syntax"], f"  {d['summary']}"]
        if d["details"]:
            out.append(f"  {d['details']}")
        out += [f"  example: {d['example']}", f"  CUDA:    {d['cuda']}"]
        if d["aliases"]:
            out.append(f"  aliases: {', '.join(d['aliases'])}")
        return out


class HelpCommandsData(TypedDict):
    commands: list[HelpCommandData]


class CommandHelps(Result, kind="help_commands"):
    """`help memcpy memset`: each command's help, one after the other."""

    Data = HelpCommandsData
    prose = True

    def text(self):
        out = []
        for d in self.data["commands"]:
            out += ([""] if out else []) + CommandHelp(d).text()
        return out


class HistoryDataEntriesItem(TypedDict):
    n: int
    text: str
    ok: bool
    code: str | None


class HistoryData(TypedDict):
    entries: list[HistoryDataEntriesItem]


class History(Result, kind="history"):
    Data = HistoryData

    def text(self):
        d = self.data
        return ([f"{e['n']:>4}  {e['text']}" + ("" if e["ok"] else f"   # failed: {e['code']}")
                for e in d["entries"]])


class QuitData(TypedDict):
    pass


class QuitResult(Result, kind="quit"):
    Data = QuitData
    prose = True

    def text(self):
        return []


class RepeatDataPlanPerRound(TypedDict):
    rounds: int
    median: float
    min: float
    max: float
    p10: float
    p90: float


class RepeatDataPlan(TypedDict):
    host_seconds: float
    per_round: RepeatDataPlanPerRound
    gpu_seconds: float | None
    busy_seconds: float | None  # the engines' busy time, where their records say it (not yet on a GPU: null)
    source: str
    rounds: int
    traced_rounds: NotRequired[int]  # a GPU with CUPTI: how many rounds it recorded
    timing: str


class RepeatData(TypedDict):
    times: int
    commands: str
    col: int
    shell: bool
    wall: NotRequired[float]
    ran: NotRequired[int]
    through_shell: NotRequired[str | None]
    plan: NotRequired[RepeatDataPlan]


class Repeated(Result, kind="repeat"):
    Data = RepeatData

    def text(self):
        d = self.data
        out = [f"repeated {d['times']}× ({d['ran']} commands) in {fmt_seconds(d['wall'])} host wall time"]
        p = d.get("plan")
        if p:
            r = p["per_round"]
            gpu = (f"; GPU {fmt_seconds(p['gpu_seconds'])} from the first start to the last end"
                   + (f", engines busy {fmt_seconds(p['busy_seconds'])}" if p.get("busy_seconds") else "")
                   + (f", timed by {p['source']}" if p["source"] != p["timing"] else "")) \
                if p.get("gpu_seconds") is not None else ""
            out.append(f"  round 1 through the shell; rounds 2–{d['times']} on the GPU side, no shell between calls: "
                       f"{fmt_seconds(p['host_seconds'])}, {fmt_seconds(r['median'])} a round (median; "
                       f"p10–p90 {fmt_seconds(r['p10'])}–{fmt_seconds(r['p90'])}){gpu} ({p['timing']})")
            if 0 < p.get("traced_rounds", 0) < p["rounds"]:
                out.append(f"  CUPTI recorded each operation of the first {p['traced_rounds']} of them; the other "
                           f"{p['rounds'] - p['traced_rounds']} ran with CUPTI paused (its records cost ~2 µs an "
                           "operation), timed by CUDA events: one span in the timeline")
        elif d.get("through_shell") and d["times"] > 1:
            why = "as asked (`shell`)" if d["through_shell"] == "asked" else f"({d['through_shell']})"
            out.append(f"  every round went through the shell {why}")
        return out


class RunData(TypedDict):
    path: str
    col: int
    scope: NotRequired[dict[str, str]]


class ScriptRun(Result, kind="run"):
    Data = RunData
    prose = True

    def text(self):
        d = self.data
        return (["(the demo ran in a scope of its own: what it made is released, your session is as it was)"]
                if d.get("scope") is not None else [])


class SayData(TypedDict):
    text: str
    lang: str
    shown: bool


class Said(Result, kind="say"):
    Data = SayData
    prose = True

    def text(self):
        d = self.data
        return [d["text"]] if d["shown"] else []
