"""Reference figures: which calibrated profiles a session's measurements can be set beside (`compare ref`), and the
rules that explain, in one line, a figure more than 25% off its reference from what `doctor` knows of this machine
(its PCIe link, NUMA nodes, IOMMU, copy engines). Pure: the facts come in as a dict, so every rule is tested with
faked ones."""

from __future__ import annotations

from pathlib import Path

from ..errors import ShellError
from ..model.machine import pcie_peak

PROFILES = Path(__file__).parent.parent / "profiles"  # every NAME.json here is a reference: `compare ref NAME`
TOLERANCE = 0.25  # a figure further than this from its reference (as a ratio) gets an explanation


def references(folder: Path | None = None) -> dict[str, Path]:
    """The shipped references by name: profiles/h100.json is `h100`."""
    folder = folder or PROFILES
    return {p.stem: p for p in sorted(folder.glob("*.json"))}


def reference_path(word: str, folder: Path | None = None) -> tuple[str, Path]:
    """(its name, its file) for `compare ref WORD`: a shipped profile's name, else a profile file (what `calibrate out
    FILE` writes). A name that is neither is refused, naming what there is."""
    shipped = references(folder)
    if word.lower() in shipped:
        return word.lower(), shipped[word.lower()]
    path = Path(word).expanduser()
    try:
        is_file = path.is_file()
    except OSError:  # a name too long for the OS to look at: no such file
        is_file = False
    if is_file:
        return word, path
    names = ", ".join(shipped) or "none"
    if "/" in word or word.endswith(".json"):
        raise ShellError("NO_REFERENCE", f"no reference '{word}': no such profile file",
                         f"shipped references: {names}; or a file `calibrate out FILE` wrote")
    raise ShellError("NO_REFERENCE", f"no reference '{word}': cudashell ships calibrated profiles for {names}",
                     f"`calibrate out {word.lower()}.json` on that GPU writes one; then `compare ref {word.lower()}.json`")


def ratio(session: float | None, reference: float | None) -> float | None:
    if session is None or not reference:
        return None
    return session / reference


def off(r: float | None) -> bool:
    """Further from the reference than the tolerance."""
    return r is not None and abs(r - 1) > TOLERANCE


def _link_words(gen, width) -> str:
    return f"Gen{gen} x{width}"


def explain(category: str, r: float, higher_is_better: bool, facts: dict, ref: dict) -> tuple[str, str]:
    """(cause, one line) for a figure whose ratio to the reference (session / reference) is off. `facts`: this
    machine as `doctor` sees it; `ref`: the reference's name and copy engines. The first rule that holds wins."""
    worse = (r < 1) == higher_is_better
    engines, ref_engines = facts.get("engines"), ref.get("engines")
    fewer_engines = engines is not None and ref_engines is not None and min(engines, ref_engines) == 1 \
        and engines != ref_engines
    if facts.get("backend") == "sim":
        why = (f": {engines} copy engine{'s' if engines != 1 else ''}, the reference's {ref_engines}"
               if fewer_engines and category == "engines" else "")
        return "simulated", f"modeled from the simulator's profile, not measured{why}"
    if category == "engines" and fewer_engines:
        if engines == 1:
            return "one-copy-engine", ("one copy engine (asyncEngineCount 1, as on some laptop and consumer GPUs): "
                                       "the two directions take turns, about half")
        return "one-copy-engine", f"the reference has one copy engine, this GPU {engines}: copies each way overlap"
    gen, width = facts.get("pcie_gen"), facts.get("pcie_width")
    max_gen, max_width = facts.get("pcie_max_gen"), facts.get("pcie_max_width")
    if worse and category in ("link", "engines", "pageable") and gen and max_gen \
            and pcie_peak(gen, width) < pcie_peak(max_gen, max_width):
        return "pcie-link", (f"the link runs at {_link_words(gen, width)}, below this GPU's "
                             f"{_link_words(max_gen, max_width)}: copies top out near {pcie_peak(gen, width) / 1e9:.1f} "
                             f"GB/s, not {pcie_peak(max_gen, max_width) / 1e9:.1f}")
    gpu_node, cpu_node = facts.get("gpu_node"), facts.get("cpu_node")
    if worse and category in ("link", "pageable", "latency", "engines") and gpu_node is not None and gpu_node >= 0 \
            and cpu_node is not None and gpu_node != cpu_node:
        return "numa", (f"the shell runs on NUMA node {cpu_node}, the GPU is on node {gpu_node}: host memory crosses "
                        f"the CPUs' link (`numactl --cpunodebind={gpu_node} --membind={gpu_node}`)")
    if worse and category in ("latency", "pinning") and (facts.get("iommu_groups") or facts.get("virtualised")):
        where = "under a hypervisor" if facts.get("virtualised") else f"{facts.get('iommu_groups')} IOMMU groups"
        return "iommu", (f"the IOMMU remaps DMA ({where}): addresses are translated, so small copies and pinning "
                         "cost more")
    if category == "pageable":
        return "host-memcpy", ("pageable copies are staged by the host's memcpy: they follow this host's CPU and "
                               "memory, not the link")
    if facts.get("gpu") and ref.get("gpu") and _model(facts["gpu"]) != _model(ref["gpu"]) and category != "host":
        return "other-gpu", f"another GPU: {facts['gpu']} here, the reference is {ref['gpu']}"
    if not worse:
        return "better", "better than the reference: a faster GPU, link or host here"
    return "unexplained", "none of doctor's findings explains it: other work on the GPU or host? measure again"


def _model(name: str) -> str:
    """A GPU's model in a name (`H100` of `NVIDIA H100 80GB HBM3`, or a profile's `H100 80GB HBM3 (simulated…)`)."""
    words = name.replace("NVIDIA", "").split("(")[0].split()
    return words[0].upper() if words else ""
