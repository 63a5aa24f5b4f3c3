"""compare ref: the session's measured figures (benches, `calibrate`, copies — a demo's too) beside a calibrated
profile's, each reference figure being the same measurement modeled on that profile, with one line of why where
they differ by more than 25% (rules over what `doctor` knows of this machine: cudashell/reference.py)."""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import TypedDict

from ..backends.profile import Profile
from ..errors import ShellError
from ..language.grammar import Arg
from ..language.registry import command, watcher
from ..model import machine
from ..model.operations import MEMCPY
from ..model.scratch import Scratch
from ..model.session import Session
from ..output.render import fit, wrap
from ..output.results import Result
from ..sizes import format_size
from ..teaching.reference import (
    TOLERANCE,
    explain,
    off,
    ratio,
    reference_path,
    references,
)

COPIES_KEPT = 256  # the newest copies a session keeps for `compare ref`
SMALL = 256 << 10  # a copy below this is latency-bound: its figure depends on latency, not the link
OUTPUT_ARGS = ("FILE", "PNG")  # a bench's --csv and --plot: not part of the measurement, and not written again


# ------------------------------------------------------------------ what the session measured
def _memory(buf) -> tuple[str, frozenset, bool]:
    return buf.kind, frozenset(buf.flags), buf.registered is not None


@watcher
def keep_measurements(session, backend, cmd, result, error) -> list:
    """Keeps each bench's and calibrate's last result (by what it measured) and the newest copies, for `compare
    ref`; shows nothing."""
    if error is not None or result is None or cmd is None:
        return []
    if result.kind in ("bench", "calibrate"):
        values = {k: v for k, v in cmd.args.values.items() if k not in OUTPUT_ARGS}
        key = (cmd.spec.name, repr(sorted(values.items())), repr(sorted(cmd.args.flags - {"--json"})))
        session.measured.results.pop(key, None)  # the newest goes last
        session.measured.results[key] = (cmd, result.data)
    elif result.kind == "copy":
        d = result.data
        src, dst = session.buffers.get(d["src"]), session.buffers.get(d["dst"])
        entry = session.trace[-1] if session.trace else None
        if src is None or dst is None or entry is None or entry.operation is not MEMCPY[d["direction"]]:
            return []
        copies = session.measured.copies
        copies.append({"src": _memory(src), "dst": _memory(dst), "bytes": d["bytes"], "async": d["async"],
                       "entry": entry, "gpu": max(src.device, dst.device)})
        del copies[:-COPIES_KEPT]
    return []


# ------------------------------------------------------------------ figures: (key, figure, unit, value, higher is better, category)
def _copy_figure(kind: str, direction: str, size: int | None) -> tuple[str, str]:
    """The profile figure a copy measures, and its category for the rules."""
    if direction == "d2d":
        figure, category = "d2d", "device"
    elif direction == "bidir":
        return f"{kind} h2d+d2h", "engines"
    elif kind == "pageable" or direction == "h2h":
        figure, category = ("h2h" if direction == "h2h" else f"pageable_{direction}"), "pageable"
    else:
        figure = {"registered": "pinned", "mapped": "zero-copy"}.get(kind, kind) + f"_{direction}"
        category = "link"
    if size is not None and size < SMALL and category in ("link", "device"):
        category = "latency"
    return figure, category


LATENCY_FIGURES = {  # bench latency's operations: the profile figure each mostly stands for
    "memcpy h2d pageable 4 B": ("staging_latency", "pageable"), "memcpy d2h pageable 4 B": ("staging_latency", "pageable"),
    "memcpy h2d pinned 4 B": ("copy_latency", "latency"), "memcpy d2h pinned 4 B": ("copy_latency", "latency"),
    "kernel launch (the call)": ("async_call", "latency"), "kernel launch + sync": ("launch + sync_latency", "latency"),
    "event record": ("async_call", "latency"), "host callback + sync": ("sync_latency", "latency"),
}
ALLOC_FIGURES = {  # bench alloc's kinds: (alloc figure, free figure, category)
    "pinned": ("pinned_alloc_per_mib", "pinned_free_per_mib", "pinning"),
    "registered": ("register_per_mib", "unregister_per_mib", "pinning"),
    "device": ("device_alloc", "device_free", "device"), "managed": ("managed alloc", "managed free", "device"),
    "pageable": ("malloc", "free", "host"),
    "async": ("pool map", "pool release", "device"), "async-warm": ("pool warm", "pool keep", "device"),
}
CALIBRATED = (  # calibrate's figures compared one for one: (field, unit, scale, higher is better, category)
    ("pinned_h2d", "GB/s", 1e-9, True, "link"), ("pinned_d2h", "GB/s", 1e-9, True, "link"),
    ("writecombined_h2d", "GB/s", 1e-9, True, "link"), ("pageable_h2d", "GB/s", 1e-9, True, "pageable"),
    ("pageable_d2h", "GB/s", 1e-9, True, "pageable"), ("d2d", "GB/s", 1e-9, True, "device"),
    ("kernel_device_read", "GB/s", 1e-9, True, "device"), ("kernel_zero_copy_read", "GB/s", 1e-9, True, "link"),
    ("copy_latency", "µs", 1e6, False, "latency"), ("launch_latency", "µs", 1e6, False, "latency"),
    ("sync_latency", "µs", 1e6, False, "latency"), ("async_call", "µs", 1e6, False, "latency"),
    ("device_alloc", "µs", 1e6, False, "device"), ("device_free", "µs", 1e6, False, "device"),
    ("pinned_alloc_per_mib", "µs/MiB", 1e6, False, "pinning"), ("pinned_free_per_mib", "µs/MiB", 1e6, False, "pinning"),
    ("register_per_mib", "µs/MiB", 1e6, False, "pinning"), ("unregister_per_mib", "µs/MiB", 1e6, False, "pinning"),
)


def bench_figures(data: dict) -> list[tuple]:
    """A bench's rows as figures, each keyed so the same bench modeled on the reference finds its own."""
    bench, rows, out = data["bench"], data["rows"], []
    if bench == "memcpy":
        for r in rows:
            figure, cat = _copy_figure(r["kind"], data["direction"], r["size"])
            out.append(((r["kind"], r["size"]), figure, f"{r['kind']} {format_size(r['size'])}", "GB/s", r["gbps"],
                        True, cat))
    elif bench == "latency":
        for r in rows:
            figure, cat = LATENCY_FIGURES.get(r["what"], (r["what"], "latency"))
            out.append((r["what"], figure, r["what"], "µs", r["median_us"], False, cat))
    elif bench == "alloc":
        for r in rows:
            base = "pinned" if r["kind"] in ("portable", "mapped", "writecombined") else r["kind"]
            alloc, free, cat = ALLOC_FIGURES[base]
            for what, figure, key in (("alloc", alloc, "alloc_s_per_gib"), ("free", free, "free_s_per_gib")):
                out.append(((r["kind"], r["size"], what), figure, f"{what} {r['kind']} {format_size(r['size'])}",
                            "ms/GiB", r[key] * 1e3, False, cat))
    elif bench == "zerocopy" and rows:  # the largest n: bandwidth-bound, where the profile's rates show
        r = rows[-1]
        for key, figure, what, cat in (("zc_kernel_us", "kernel_zero_copy_read", "zero-copy kernel", "link"),
                                       ("dev_kernel_us", "kernel_device_read", "device kernel", "device"),
                                       ("zc_step_us", "zero-copy step", "zero-copy step", "link"),
                                       ("dev_step_us", "device step", "device step (pageable copies)", "pageable")):
            out.append(((r["n"], key), figure, f"{what}, n = {r['n']:,}", "µs", r[key], False, cat))
    elif bench == "overlap":
        for r in rows:
            out.append((r["streams"], "overlap", f"{r['streams']} stream{'s' if r['streams'] > 1 else ''}", "ms",
                        r["ms"], False, "engines" if r["streams"] > 1 else "link"))
    elif bench == "peer":
        for r in rows:
            out.append(((r["src"], r["dst"], r["peer"]), "peer_rate" if r["peer"] else "peer_staged_rate",
                        f"GPU {r['src']} → GPU {r['dst']}, peer access {'on' if r['peer'] else 'off'}", "GB/s",
                        r["gbps"], True, "device"))
    return out


def _copy_path(src, dst) -> str | None:
    """The direction a copy took by its memory (managed memory, which migrates, is not compared)."""
    if "managed" in (src[0], dst[0]):
        return None
    return f"{'d' if src[0] == 'device' else 'h'}2{'d' if dst[0] == 'device' else 'h'}"


def _host_kind(side) -> str:
    kind, flags, registered = side
    if kind == "pageable":
        return "registered" if registered else "pageable"
    return "writecombined" if "writecombined" in flags else kind


# ------------------------------------------------------------------ the same measurements, modeled on the reference
def _replay_bench(sim, cmd, progress) -> dict:
    args = replace(cmd.args, values={k: v for k, v in cmd.args.values.items() if k not in OUTPUT_ARGS},
                   flags=set(cmd.args.flags) - {"--json"})
    return cmd.spec.handler(Session(progress=progress), sim, args).data


def _replay_copy(sim, src, dst, nbytes: int, async_: bool) -> float:
    """A copy between memory like the session's, on the reference: its GPU time."""
    with Scratch(sim, None) as s:  # a fresh simulator: its first GPU's primary context
        bufs = []
        for kind, flags, registered in (src, dst):
            buf, _ = s.alloc(kind, nbytes, flags)
            if registered:
                s.register(buf)
            bufs.append(buf)
        t = sim.memcpy(bufs[0], 0, bufs[1], 0, nbytes, None, async_)
        if t.seconds is None:
            sim.device_sync()
            return sim.resolve(t.token)[0]
        return t.seconds


def _row(key_figure, by, unit, value, ref_value, higher, category, facts, ref) -> dict:
    r = ratio(value, ref_value)
    row = {"figure": key_figure, "by": by, "unit": unit, "session": value, "reference": ref_value, "ratio": r,
           "category": category, "cause": None, "explanation": None}
    if off(r):
        row["cause"], row["explanation"] = explain(category, r, higher, facts, ref)
    return row


def compare_rows(session, sim, profile: Profile, facts: dict, ref: dict, progress) -> tuple[list, list]:
    rows, skipped = [], []
    for cmd, data in session.measured.results.values():
        line = cmd.segment.text
        if data.get("bench") is None:  # calibrate: its profile's figures, one for one
            got = data["profile"]
            for field, unit, scale, higher, cat in CALIBRATED:
                if field in got:
                    rows.append(_row(field, line, unit, got[field] * scale, getattr(profile, field) * scale, higher,
                                     cat, facts, ref))
            continue
        try:
            modeled = {f[0]: f for f in bench_figures(_replay_bench(sim, cmd, progress))}
        except ShellError as e:  # the reference cannot run it: one GPU for `bench peer`, its storage budget
            skipped.append(f"{line}: the reference cannot model it ({e.code}: {e.message})")
            continue
        for key, figure, what, unit, value, higher, cat in bench_figures(data):
            other = modeled.get(key)
            rows.append(_row(figure, f"bench {data['bench']}: {what}", unit, value, other[4] if other else None,
                             higher, cat, facts, ref))
    groups: dict = {}
    for c in session.measured.copies:
        direction = _copy_path(c["src"], c["dst"])
        if direction is None or c["gpu"] != 0 or c["entry"].seconds is None:
            continue
        groups.setdefault((c["src"], c["dst"], c["bytes"], c["async"]), []).append(c["entry"].seconds)
    for (src, dst, nbytes, async_), times in groups.items():
        direction = _copy_path(src, dst)
        kind = _host_kind(dst if direction == "d2h" else src) if direction in ("h2d", "d2h") else \
            "device" if direction == "d2d" else "pageable"
        figure, cat = _copy_figure(kind, direction, nbytes)
        seconds = statistics.median(times)
        model = _replay_copy(sim, src, dst, nbytes, async_)
        by = f"memcpy {direction} {kind} {format_size(nbytes)}{' async' if async_ else ''} ×{len(times)}"
        rows.append(_row(figure, by, "GB/s", nbytes / seconds / 1e9 if seconds else None,
                         nbytes / model / 1e9 if model else None, True, cat, facts, ref))
    return rows, skipped


def machine_facts(backend) -> dict:
    """This machine as `doctor` reads it (commands/doctor.py): the link, NUMA nodes, IOMMU, copy engines."""
    link = backend.memory_paths()["pcie"] or {}
    iommu = machine.iommu()
    profile = backend.capabilities.profile
    return {"backend": backend.name, "gpu": backend.info.name, "sim_profile": profile.name if profile else None,
            "engines": backend.info.async_engine_count, "pcie_gen": link.get("current_gen"),
            "pcie_width": link.get("current_width"), "pcie_max_gen": link.get("max_gen"),
            "pcie_max_width": link.get("max_width"), "gpu_node": link.get("numa_node"),
            "cpu_node": machine.cpu_numa_node(), "iommu_groups": iommu["groups"], "iommu_cmdline": iommu["cmdline"],
            "virtualised": machine.virtualised()}


def _offer(session, words, index) -> list[tuple[str, str]]:
    return [(name, "calibrated profile") for name in references()]


@command("compare ref", "session", "the session's measured figures beside a calibrated GPU's, with why they differ",
         "compare ref h100", "(none: the figures the session's benches, demos, calibrate and copies measured)",
         args=(Arg("REF", "file", complete=_offer),), exported=False, saved=False,
         details="After a bench, a demo, `calibrate` or copies: each figure they measured (bandwidths, latencies, "
                 "allocation costs) beside the reference's — the same measurement modeled on a calibrated profile: "
                 "a shipped one by name (h100, h200: the package's profiles/ folder), or a file `calibrate out FILE` "
                 "wrote on another GPU. Where they differ by more than 25%, one line says why, from what `doctor` "
                 "knows of this machine: a PCIe link below the GPU's, a NUMA node far from the GPU, the IOMMU, one "
                 "copy engine, the host's memcpy (pageable copies); on the simulator, that the figures are modeled "
                 "from its profile. e.g. `bench memcpy h2d pinned pageable; compare ref h100`. A buffer cannot be "
                 "named `ref`: `compare A B` compares buffers.")
def compare_ref(session, backend, args):
    word = args.get("REF")
    try:
        name, path = reference_path(word)
    except ShellError as e:
        e.col = args.col("REF")
        if word in session.buffers:
            e.hint = f"`compare ref` sets figures beside a profile; `compare A B` compares buffers such as {word}"
        raise
    try:
        profile = Profile.load(str(path))
    except ShellError as e:  # its hint named the simulator's profiles: `compare ref` takes references
        e.col, e.hint = args.col("REF"), f"shipped references: {', '.join(references())}; or a file `calibrate out " \
                                         "FILE` wrote"
        raise
    if not session.measured.results and not session.measured.copies:
        raise ShellError("NOTHING_MEASURED", "this session has measured nothing to compare yet",
                         "run a bench (`bench memcpy`), a demo, `calibrate` or a `memcpy` first", args.col("REF"))
    session.completed(backend)  # the copies still running: their times
    facts = machine_facts(backend)
    ref = {"name": name, "gpu": profile.name, "engines": profile.async_engine_count}

    def progress(label, done, total):
        if session.progress:
            session.progress(f"{name}: {label}", done, total)

    from ..backends.sim import SimBackend

    mine = backend.capabilities.profile  # on the simulator, the budget that stopped a bench stops its replay too
    sim = SimBackend(replace(profile, storage_budget=min(profile.storage_budget, mine.storage_budget))
                     if mine else profile)
    try:
        rows, skipped = compare_rows(session, sim, profile, facts, ref, progress)
    finally:
        sim.close()
    return ReferenceFigures({"reference": name, "path": str(path), "profile": profile.name,
                             "timing": backend.timing_label, "tolerance": TOLERANCE, "rows": rows,
                             "not_compared": skipped, "facts": facts})


# ------------------------------------------------------------------ the results of these commands
class ReferenceRow(TypedDict):
    figure: str  # the profile's figure it measures (pinned_h2d, copy_latency, …) or what it is
    by: str  # the measurement: a bench's point, calibrate, or copies of one kind and size
    unit: str
    session: float | None
    reference: float | None  # the same measurement modeled on the reference; null where it has none
    ratio: float | None  # session / reference
    category: str  # what the figure depends on: link, pageable, engines, latency, pinning, device, host
    cause: str | None  # the rule that explains a figure off by more than the tolerance
    explanation: str | None


class ReferenceFacts(TypedDict):
    backend: str
    gpu: str
    sim_profile: str | None
    engines: int
    pcie_gen: int | None
    pcie_width: int | None
    pcie_max_gen: int | None
    pcie_max_width: int | None
    gpu_node: int | None
    cpu_node: int | None
    iommu_groups: int
    iommu_cmdline: str | None
    virtualised: bool


class ReferenceData(TypedDict):
    reference: str
    path: str
    profile: str
    timing: str
    tolerance: float
    rows: list[ReferenceRow]
    not_compared: list[str]
    facts: ReferenceFacts


CAUSES = {"simulated": "simulated", "one-copy-engine": "one copy engine", "pcie-link": "PCIe link", "numa": "NUMA node",
          "iommu": "IOMMU", "host-memcpy": "host memcpy", "other-gpu": "another GPU", "better": "better",
          "unexplained": "not explained"}  # the rules' causes (reference.explain), as the table's why column names them


def _number(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}" if abs(v) >= 1 else f"{v:.3g}"


class ReferenceFigures(Result, kind="reference"):
    Data = ReferenceData

    def lines(self, tablefmt="simple", width=0):
        d = self.data
        sim = " (on the simulator both are modeled: this compares two profiles)" if d["facts"]["backend"] == "sim" else ""
        head = (f"this session ({d['timing']}, {d['facts']['gpu']}) beside {d['reference']} ({d['profile']}): the "
                f"same measurements modeled on it{sim}; why, where they differ by more than {d['tolerance']:.0%}")
        notes: dict[str, int] = {}  # each explanation once, under the table, numbered in the rows
        for r in d["rows"]:
            if r["explanation"]:
                notes.setdefault(r["explanation"], len(notes) + 1)
        table = [[r["figure"], r["by"], f"{_number(r['session'])} {r['unit']}", f"{_number(r['reference'])} {r['unit']}",
                  f"{r['ratio']:.2f}" if r["ratio"] is not None else "-",
                  f"({notes[r['explanation']]}) {CAUSES[r['cause']]}" if r["explanation"] else ""] for r in d["rows"]]
        out = [*wrap([head], width), fit(table, ["figure", "measured by", "this session", "reference", "ratio", "why"],
                                         tablefmt, width, colalign=("left", "left", "right", "right", "right", "left"))]
        out += wrap([f"({n}) {text}" for text, n in notes.items()], width)
        if d["rows"] and not any(r["explanation"] for r in d["rows"]):
            out.append(f"every figure is within {d['tolerance']:.0%} of the reference")
        out += [f"not compared: {s}" for s in d["not_compared"]]
        return out
