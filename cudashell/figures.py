"""Results as pictures (matplotlib, imported only when a picture is asked for): `bench … --plot`, and in a notebook
the timeline, the benches, the profile and a traced launch inline (each result's `figure()` picks its picture here).
Part of rendering, like render.py: no command logic here."""

from __future__ import annotations

ENGINE_COLOURS = {"memcpy h2d": "tab:blue", "memcpy d2h": "tab:orange", "memcpy d2d": "tab:purple",
                  "memset": "tab:gray", "prefetch": "tab:olive"}


def _pyplot():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")  # no window: the figure is saved or shown inline
    import matplotlib.pyplot as plt

    return plt


def close(fig) -> None:
    _pyplot().close(fig)


def bench_figure(data: dict):
    """GB/s (or µs, or speedup) against size, one line per kind: what `bench … --plot` draws."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    rows, bench = data["rows"], data["bench"]
    if bench == "memcpy":
        for kind in dict.fromkeys(r["kind"] for r in rows):
            pts = [r for r in rows if r["kind"] == kind]
            ax.plot([r["size"] for r in pts], [r["gbps"] for r in pts], marker="o", label=kind)
        ax.set_xscale("log", base=2)
        ax.set(xlabel="bytes per copy", ylabel="GB/s")
    elif bench == "zerocopy":
        for key in ("zc_kernel_us", "dev_kernel_us", "zc_step_us", "dev_step_us"):
            ax.plot([r["n"] for r in rows], [r[key] for r in rows], marker="o", label=key)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set(xlabel="elements", ylabel="µs")
    elif bench == "overlap":
        ax.plot([r["streams"] for r in rows], [r["speedup"] for r in rows], marker="o", label="speedup")
        ax.set(xlabel="streams", ylabel="× one stream")
    elif bench == "peer":
        labels = [f"{r['src']}→{r['dst']} {'on' if r['peer'] else 'off'}" for r in rows]
        ax.bar(labels, [r["gbps"] for r in rows], color=["tab:green" if r["peer"] else "tab:gray" for r in rows])
        ax.set(ylabel="GB/s", xlabel="GPU pair, peer access")
    elif bench == "latency":
        ax.barh([r["what"] for r in rows], [r["median_us"] for r in rows])
        ax.set(xlabel="µs (median)")
    else:
        for kind in dict.fromkeys(r["kind"] for r in rows):
            pts = [r for r in rows if r["kind"] == kind]
            ax.plot([r["size"] for r in pts], [r["alloc_s_per_gib"] for r in pts], marker="o", label=kind)
        ax.set(xlabel="bytes", ylabel="seconds per GiB")
    ax.set_title(f"cudashell bench {bench} ({data['timing']})")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return fig


def timeline_figure(data: dict):
    """A Gantt chart: one row per stream and per engine, each operation a bar from start to end; the wait from
    issue to start hatched on its stream's row."""
    plt = _pyplot()
    spans = data["spans"]
    rows = [r["name"] for r in data["rows"]]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.2))
    t0 = data["start"]
    for s in spans:
        words = s["op"].split()
        colour = ENGINE_COLOURS.get(" ".join(words[:2]) if words[0] == "memcpy" else words[0], "tab:green")
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
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in list(ENGINE_COLOURS.values()) + ["tab:green"]]
    ax.legend(handles, list(ENGINE_COLOURS) + ["kernel"], loc="upper center", bbox_to_anchor=(0.5, -0.25),
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
