"""Results as pictures (matplotlib, imported only when a picture is asked for): `bench … --plot`, and in a notebook
the timeline, the benches, the profile and a traced launch inline (each result's `figure()` picks its picture here).
Part of rendering, like render.py: no command logic here."""

from __future__ import annotations

from pathlib import Path

from ..model.operations import of_text
from .files import replace_file


def _pyplot():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")  # no window: the figure is saved or shown inline
    import matplotlib.pyplot as plt

    return plt


def close(fig) -> None:
    _pyplot().close(fig)


def save(fig, path: str, col: int | None = None) -> None:
    """`--plot FILE`: the picture in the format FILE's name ends with, replacing FILE whole or leaving it as it was.
    A name with no format, or one matplotlib does not write, is a ValueError: the file written is the file named
    (savefig would add `.png`, a name nobody checked: confinement saw FILE)."""
    fmt = Path(path).suffix[1:].lower()
    if not fmt:
        raise ValueError(f"{path} names no format")
    replace_file(path, lambda f: fig.savefig(f, format=fmt, dpi=100, bbox_inches="tight"), col)


def bench_figure(data: dict):
    """What `bench … --plot` draws, by bench: GB/s against size, µs per operation, seconds per GiB, µs against
    elements, speedup against streams, GB/s per GPU pair. Sizes go on a log2 axis named in bytes; legends sit
    outside the plot, where they cover no line."""
    plt = _pyplot()
    bench = data["bench"]
    if bench == "alloc":
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        _alloc(fig, axes, data["rows"])
    else:
        fig, ax = plt.subplots(figsize=(7, 4))
        {"memcpy": _memcpy, "latency": _latency, "zerocopy": _zerocopy, "overlap": _overlap,
         "peer": _peer}[bench](ax, data)
    fig.suptitle(f"cudashell bench {bench} ({data['timing']})")
    fig.tight_layout()  # the title and the legends inside the figure, clear of the axes
    return fig


def _size_axis(ax, sizes: list[int], label: str) -> None:
    """Sizes on a log2 axis, ticked at the sizes measured (at most nine of them) and named as sizes (4 KiB, 1 GiB)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    from ..sizes import format_size

    ax.set_xscale("log", base=2)
    sizes = sorted(set(sizes))
    ax.xaxis.set_major_locator(FixedLocator(sizes[::-(-len(sizes) // 9)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: format_size(int(x))))
    ax.set_xlabel(label)


def _by_kind(rows: list[dict]) -> dict[str, list[dict]]:
    return {kind: [r for r in rows if r["kind"] == kind] for kind in dict.fromkeys(r["kind"] for r in rows)}


def _legend_beside(ax) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0, fontsize="small")


def _memcpy(ax, data: dict) -> None:
    for kind, pts in _by_kind(data["rows"]).items():
        ax.plot([r["size"] for r in pts], [r["gbps"] for r in pts], marker="o", label=kind)
    if data.get("peak"):
        ax.axhline(data["peak"] / 1e9, color="gray", linestyle="--", linewidth=1,
                   label=f"peak: {data['peak_of']}")
    _size_axis(ax, [r["size"] for r in data["rows"]], "bytes per copy")
    ax.set_ylabel("GB/s")
    _legend_beside(ax)


def _latency(ax, data: dict) -> None:
    rows = data["rows"]
    med = [r["median_us"] for r in rows]
    spread = [[m - r["p10_us"] for m, r in zip(med, rows)], [r["p90_us"] - m for m, r in zip(med, rows)]]
    ax.barh([r["what"] for r in rows], med, xerr=spread, capsize=3, color="tab:blue")
    ax.invert_yaxis()  # in the table's order, top down
    ax.set_xlabel("µs per round (median; whiskers p10–p90)")


def _alloc(fig, axes, rows: list[dict]) -> None:
    for ax, key, title in zip(axes, ("alloc_s_per_gib", "free_s_per_gib"), ("allocate", "free")):
        for kind, pts in _by_kind(rows).items():
            ax.plot([r["size"] for r in pts], [r[key] for r in pts], marker="o", label=kind)
        _size_axis(ax, [r["size"] for r in rows], "bytes")
        ax.set_yscale("log")  # cudaMalloc's µs and pinning's tenths of a second on one axis
        _at_least_a_decade(ax, [r[key] for r in rows])
        ax.set(ylabel="seconds per GiB", title=title)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="center left", bbox_to_anchor=(1.0, 0.5),
               fontsize="small")


def _at_least_a_decade(ax, values: list[float]) -> None:
    """A log axis spanning at least a decade around its values: a cost the model keeps constant per GiB varies in
    its last bits only (the clock's rounding), and matplotlib would zoom into that as a steep slope whose ticks
    all read the same number."""
    values = [v for v in values if v > 0]
    if values and max(values) < 10 * min(values):
        mid = (max(values) * min(values)) ** 0.5
        ax.set_ylim(mid / 10 ** 0.5, mid * 10 ** 0.5)


ZEROCOPY_LINES = {  # key: (what a reader calls it, colour, line style): zero-copy orange, device blue; kernels dashed
    "zc_kernel_us": ("zero-copy kernel (reads mapped host memory)", "tab:orange", "--"),
    "dev_kernel_us": ("device kernel (reads device memory)", "tab:blue", "--"),
    "zc_step_us": ("zero-copy step: kernel, then copy C out", "tab:orange", "-"),
    "dev_step_us": ("device step: copy A and B in, kernel, copy C out", "tab:blue", "-"),
}


def _zerocopy(ax, data: dict) -> None:
    rows = data["rows"]
    n = [r["n"] for r in rows]
    for key, (label, colour, style) in ZEROCOPY_LINES.items():
        ax.plot(n, [r[key] for r in rows], marker="o", color=colour, linestyle=style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set(xlabel="elements (n floats per array)", ylabel="µs")
    # where the bench found one strategy keeps winning from: what its table says
    zc, dev = data.get("zc_step_wins_from"), data.get("dev_step_wins_from")
    winner, at = ("zero-copy", zc) if zc else ("device memory", dev)
    if at and at != n[0]:
        ax.axvline(at, color="gray", linestyle=":")
        ax.annotate(f"{winner} wins from n = {at:,}", xy=(at, 0.98), xycoords=("data", "axes fraction"),
                    xytext=(4, 0), textcoords="offset points", rotation=90, va="top", fontsize="small")
    elif at:
        ax.text(0.02, 0.98, f"{winner} wins at every n measured", transform=ax.transAxes, va="top",
                fontsize="small")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize="small", frameon=False)


def _overlap(ax, data: dict) -> None:
    rows = data["rows"]
    ax.plot([r["streams"] for r in rows], [r["speedup"] for r in rows], marker="o")
    ax.set(xlabel="streams", ylabel="speedup over one stream (×)")


def _peer(ax, data: dict) -> None:
    rows = data["rows"]
    labels = [f"{r['src']}→{r['dst']} {'on' if r['peer'] else 'off'}" for r in rows]
    ax.bar(labels, [r["gbps"] for r in rows], color=["tab:green" if r["peer"] else "tab:gray" for r in rows])
    ax.set(ylabel="GB/s", xlabel="GPU pair, peer access")


def timeline_figure(data: dict):
    """A Gantt chart: one row per stream and per engine, each operation a bar from start to end; the wait from
    issue to start hatched on its stream's row."""
    plt = _pyplot()
    spans = data["spans"]
    rows = [r["name"] for r in data["rows"]]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.2))
    t0 = data["start"]
    legend = {}  # colour → name, of the kinds drawn
    for s in spans:
        operation, _ = of_text(s["op"])
        colour = operation.colour
        legend.setdefault(colour, operation.legend)
        for row in (f"stream {s['stream']}", s["engine"]):
            if row in rows:
                y = rows.index(row)
                ax.broken_barh([((s["start"] - t0) * 1e3, (s["end"] - s["start"]) * 1e3)], (y - 0.4, 0.8),
                               facecolors=colour, zorder=2)  # over any wait drawn on the same row
        if s.get("issued") is not None and s["issued"] < s["start"] and f"stream {s['stream']}" in rows:
            y = rows.index(f"stream {s['stream']}")
            ax.broken_barh([((max(s["issued"], t0) - t0) * 1e3, (s["start"] - max(s["issued"], t0)) * 1e3)],
                           (y - 0.15, 0.3), facecolors="none", edgecolors="gray", hatch="..", zorder=1)
    ax.set_yticks(range(len(rows)), rows)
    ax.invert_yaxis()
    ax.set(xlabel="ms since the first operation started")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in legend]
    ax.legend(handles, list(legend.values()), loc="upper center", bbox_to_anchor=(0.5, -0.25),
              ncol=6, fontsize="small", frameon=False)
    ax.set_title(f"timeline of {data['ops']} operations ({data.get('source', data['timing'])})")
    return fig


def profile_figure(data: dict):
    """Where the GPU's time went: total time per activity, longest first."""
    plt = _pyplot()
    gpu = sorted(data["gpu"], key=lambda r: r["total"])
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(gpu) + 1.2))
    ax.barh([r["name"] for r in gpu], [r["total"] * 1e3 for r in gpu])
    ax.set(xlabel="ms", title=f"GPU activities ({data.get('source', data['timing'])})")
    return fig


def access_figure(data: dict):
    """show-access as GPU-Puzzles draws it: a row of cells per buffer, each cell an element, coloured by the thread
    that wrote it (grey where it was only read), labelled with the threads that wrote (w) and read (r) it."""
    plt = _pyplot()
    access = data["access"]
    threads = sorted({t for buf in access.values() for c in buf["elements"].values() for t in c["read"] + c["write"]})
    colour = {t: plt.cm.tab20(i % 20) for i, t in enumerate(threads)}
    width = max(len(buf["elements"]) for buf in access.values())
    fig, axes = plt.subplots(len(access), 1, figsize=(min(0.55 * width + 1.5, 30), 1.1 * len(access) + 0.6),
                             squeeze=False)
    for ax, (name, buf) in zip(axes[:, 0], access.items()):
        for x, (elem, cell) in enumerate(buf["elements"].items()):
            writer = cell["write"][-1] if cell["write"] else None
            ax.add_patch(plt.Rectangle((x, 0), 0.95, 0.95, facecolor=colour[writer] if writer else "0.92",
                                       edgecolor="black"))
            ax.text(x + 0.47, 0.72, f"[{elem}]", ha="center", fontsize=7)
            for y, side in ((0.45, "write"), (0.18, "read")):
                if cell[side]:
                    ax.text(x + 0.47, y, side[0] + " " + " ".join(cell[side][:2]) + ("…" if len(cell[side]) > 2 else ""),
                            ha="center", fontsize=6)
        ax.set_xlim(0, width)
        ax.set_ylim(0, 1)
        ax.axis("off")
        ax.set_title(name, fontsize=9, loc="left")
    fig.suptitle(f"launch {data['kernel']}: which thread wrote (w, colour) and read (r) each element", fontsize=9)
    fig.tight_layout()
    return fig
