"""The reference in docs/ is the registry's; help comes from the same specs."""

import re

from cudashell.docs import REFERENCE, reference_markdown
from cudashell.language.registry import specs


def test_command_reference_is_current():
    assert REFERENCE.read_text() == reference_markdown(), "run: python -m cudashell.docs --write"


def test_every_command_is_documented_with_syntax_example_and_cuda_call():
    text = REFERENCE.read_text()
    for s in specs():
        assert f"### `{s.name}`" in text and s.syntax() in text and s.example in text and s.cuda


def test_help_lists_every_command_and_explains_one(sim):
    c = sim
    listed = {cmd["name"] for cmds in c.ok("help")["groups"].values() for cmd in cmds}
    assert listed == {s.name for s in specs()}
    h = c.ok("help memcpy")
    assert h["syntax"].startswith("memcpy [h2d|d2h|d2d|h2h] SRC DST") and "cudaMemcpy" in h["cuda"]
    assert c.ok("help stream create")["name"] == "stream create"
    assert {x["name"] for x in c.ok("help stream")["groups"]["stream"]} == {"stream create", "stream destroy", "stream query"}
    assert c.fails("help memcopy")["hint"] == "did you mean `memcpy`?"


# ------------------------------------------------------------------ examples generated from real runs
def test_every_example_in_the_readme_and_the_guide_is_a_real_run():
    """Each marked block is what its commands print on the simulator now: a change to the output fails here
    until `python -m cudashell.docs --write` regenerates it."""
    from cudashell.docs import GUIDE, README, with_examples

    for doc in (README, GUIDE):
        text = doc.read_text()
        assert with_examples(text) == text, f"{doc.name} is stale: run python -m cudashell.docs --write"
    assert "$ cudashell --backend sim examples/tour.cush\n" in README.read_text()


def test_every_example_block_of_the_guide_is_generated_or_says_which_gpu_measured_it():
    from cudashell.docs import GUIDE, unchecked_blocks

    assert unchecked_blocks(GUIDE.read_text()) == []


def test_a_block_outside_the_markers_is_reported_unless_it_says_which_gpu_measured_it():
    from cudashell.docs import unchecked_blocks

    text = ("Intro.\n\n```\ncush> memcpy p d\nmemcpy h2d p → d: 54.1 GB/s\n```\n\n"
            "Measured on an H100 80GB HBM3:\n\n```\ncush> bench latency\n```\n")
    assert unchecked_blocks(text) == ["line 3: cush> memcpy p d"]
    assert unchecked_blocks(text.replace("Measured on an H100 80GB HBM3:", "Latency:")) == [
        "line 3: cush> memcpy p d", "line 10: cush> bench latency"]


def test_a_script_block_is_regenerated_from_its_own_commands():
    """The commands are the block's `cush>` lines (a `<<<` block with its lines); the output is the run's."""
    from cudashell.docs import with_examples

    text = ("before\n<!-- example: t.cush -->\n```\ncush> alloc pinned 1MB as p\nmade up\ncush> fill p iota\n"
            "cush> kernel define k <<<\n__global__ void k(float *a) { a[0] = 1; }\n>>>\nstale\n```\n"
            "<!-- example end -->\nafter\n")
    out = with_examples(text)
    assert out.startswith("before\n<!-- example: t.cush -->\n```\ncush> alloc pinned 1MB as p\np: pinned 1 MiB")
    assert "made up" not in out and "stale" not in out and out.endswith("```\n<!-- example end -->\nafter\n")
    assert re.search(r"cush> fill p iota\np: 1048576 uint8 elements ← iota — host [0-9.]+ µs \(modeled\)\n", out)
    assert "cush> kernel define k <<<\n__global__ void k(float *a) { a[0] = 1; }\n>>>\nloaded k(a)\n" in out
    assert with_examples(out) == out


def test_a_session_block_runs_its_dollar_lines_and_an_error_names_the_script():
    from cudashell.docs import with_examples

    text = ("<!-- example -->\n```\n$ cudashell --backend sim --quiet -c 'alloc device 1KB as d; show d'\nold\n"
            "$ cat examples/tour.cush\n```\n<!-- example end -->\n")
    out = with_examples(text)
    lines = out.splitlines()
    assert lines[3].startswith("d: device 1 KiB (1024 B)")
    assert lines[4].startswith("-c:1:29: NOT_HOST_ACCESSIBLE: d is device memory")
    assert lines[5] == "$ cat examples/tour.cush"
    from cudashell.docs import ROOT

    assert out.partition("$ cat examples/tour.cush\n")[2].startswith((ROOT / "examples/tour.cush").read_text())
    assert with_examples(out) == out


def test_a_session_block_runs_only_the_simulator_so_that_it_prints_the_same_everywhere():
    import pytest

    from cudashell.docs import with_examples

    for line in ("$ cudashell -c ls", "$ cudashell --backend auto -c ls", "$ rm -rf x"):
        with pytest.raises(ValueError, match="--backend sim"):
            with_examples(f"<!-- example -->\n```\n{line}\n```\n<!-- example end -->\n")


def test_the_guide_s_figures_in_prose_are_those_its_examples_print():
    """The prose quotes the runs below it: 31.6 sectors a request for rowsum, 1056 wavefronts for the column
    reads, 2^-46 for the fused multiply-add."""
    from cudashell.docs import GUIDE

    text = GUIDE.read_text()
    assert "counts 31.6 sectors a request" in text and "= 31.6 sectors a request: strided" in text
    assert "32 each: 1056)" in text and "64 requests, 1056 wavefronts" in text
    assert "the answer is 2^-46" in text and f"r [float32] @0: {2.0 ** -46!r} {2.0 ** -46!r}" in text


def test_a_command_the_echo_does_not_show_cannot_be_a_block_of_its_own():
    """`say` prints its text, not its command: a block holding it could not be read back, so --write refuses."""
    import pytest

    from cudashell.docs import with_examples

    with pytest.raises(ValueError, match="say en hello"):
        with_examples("<!-- example: s.cush -->\n```\ncush> say en hello\n```\n<!-- example end -->\n")


# ------------------------------------------------------------------ the demo list
def test_the_demo_lists_in_the_readme_and_the_guide_are_the_shipped_demos():
    from cudashell.docs import GUIDE, README, demo_table, with_examples
    from cudashell.teaching.shipped import demos

    assert len(demos()) >= 10
    for doc in (README, GUIDE):
        text = doc.read_text()
        assert demo_table() in text and with_examples(text) == text
        for name in demos():
            assert f"| `{name}` |" in text


def test_no_count_of_demos_in_the_docs_disagrees_with_the_shipped_demos():
    import re

    from cudashell.docs import GUIDE, README
    from cudashell.teaching.shipped import demos

    words = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split()
    for doc in (README, GUIDE):
        for m in re.finditer(r"\b(\w+)\s+(?:[\w,-]+\s+){0,3}demos\b", doc.read_text()):
            n = m.group(1).lower()
            count = int(n) if n.isdigit() else words.index(n) if n in words else None
            assert count in (None, len(demos())), f"{doc.name}: {m.group(0)!r}"


# ------------------------------------------------------------------ claims checked against the code
def test_the_readme_and_the_guide_name_every_built_in_kernel():
    from cudashell.docs import GUIDE, README
    from cudashell.model.kernels import BUILTINS

    readme = README.read_text().partition("built-in kernels (")[2].partition(")")[0]
    guide = GUIDE.read_text().partition("Built-in kernels on both backends")[2].partition("On either backend")[0]
    for name in BUILTINS:
        assert f"`{name}`" in readme and f"`{name} " in guide, name


def test_the_guide_lists_the_keys_of_an_ls_buffer(sim):
    import re

    from cudashell.docs import GUIDE

    sim.ok("alloc pinned 4KB as p")
    keys = set(sim.ok("ls")["buffers"][0])
    claim = GUIDE.read_text().partition('`ls` gives `{"buffers": [{')[2].partition("}]")[0]
    assert set(re.findall(r'"(\w+)"', claim)) == keys


def _prose(text: str) -> str:
    import re

    return re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)  # the blocks are checked by being runs


def test_every_command_written_out_in_the_readme_and_the_guide_parses():
    """`memcpy h[0:+32MB] d[32MB:] async stream 1` in the prose is checked as the shell checks a line; a name
    alone (`show`) or a form with placeholders (`fill A V`) is not a command line."""
    import re

    from cudashell.errors import ShellError
    from cudashell.language.grammar import split_commands
    from cudashell.language.registry import load, parse_segment, specs

    load()
    names, full = {s.name.split()[0] for s in specs()}, {s.name for s in specs()}
    from cudashell.docs import GUIDE, README

    checked = 0
    for doc in (README, GUIDE):
        for code in re.findall(r"`([^`\n]+)`", _prose(doc.read_text())):
            if (len(code.split()) < 2 or code.split()[0] not in names or code.strip() in full
                    or re.search(r"\b[A-Z][A-Z0-9_]*\b|…|\|", code)):
                continue
            try:
                for seg in split_commands(code):
                    parse_segment(seg)
                checked += 1
            except ShellError as e:
                assert e.code == "USAGE" and e.message.startswith("missing "), f"{doc.name}: `{code}`: {e}"
    assert checked > 30


def test_every_error_code_the_readme_and_the_guide_name_exists():
    import re

    from cudashell.docs import GUIDE, README
    from cudashell.errors import SHELL_CODES
    from cudashell.frontends.environment import ExitStatus

    others = {"XDG_CONFIG_HOME", "XDG_STATE_HOME", "NO_COLOR", "CUDASHELL_TRACING", "RLIMIT_MEMLOCK"}
    for doc in (README, GUIDE):
        for code in re.findall(r"`\$?([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)", doc.read_text()):
            assert (code in SHELL_CODES or code.startswith("CUDA_ERROR") or code in ExitStatus.__members__
                    or code in others), f"{doc.name}: {code}"


def test_the_guide_says_which_benches_take_each_output_flag():
    import re

    from cudashell.docs import GUIDE
    from cudashell.language.registry import load, specs

    load()
    benches = {s.name: s.syntax() for s in specs() if s.name.startswith("bench ")}
    line = next(x for x in GUIDE.read_text().splitlines() if x.startswith("- Every bench takes"))
    assert all("--json" in v and "--csv FILE" in v for v in benches.values())
    assert "`--json`" in line and "`--csv FILE`" in line and "`--plot FILE.png`" in line
    without_plot = set(re.findall(r"`(bench \w+)`", line.partition("all but")[2]))  # "…, and all but `bench x` …"
    assert without_plot == {k for k, v in benches.items() if "--plot" not in v}


def test_the_guide_opens_with_the_first_ten_minutes_each_step_a_generated_example():
    """Issue 37 item 8: the tour, a lesson, a demo and a kernel of one's own, before anything else; the examples
    are real runs (test_every_example_in_the_readme_and_the_guide_is_a_real_run holds them current)."""
    from cudashell.docs import EXAMPLE, GUIDE

    text = GUIDE.read_text()
    chapters = [line for line in text.splitlines() if line.startswith("## ")]
    assert chapters[0] == "## Your first ten minutes"
    first = text.split("\n## ")[1]
    assert "examples/tour.cush" in first and "lesson list" in first
    runs = [m.group("body") for m in EXAMPLE.finditer(first)]
    assert any("cush> lesson pinned" in r and "not yet:" in r for r in runs)
    assert any("cush> demo register" in r for r in runs)
    assert any("cush> kernel define twice" in r and "0.0 2.0 4.0" in r for r in runs)


def test_help_alone_is_one_screen_and_help_all_or_a_group_lists_the_rest(sim):
    brief = sim.run("help")[0]["result"]
    assert brief["brief"] is True and sum(map(len, brief["groups"].values())) == len(specs())
    assert sim.ok("help all")["brief"] is False
    assert [g for g, cmds in sim.ok("help memory")["groups"].items() if cmds] == ["memory"]


def test_help_of_a_name_both_a_group_and_a_command_is_the_commands(sim):
    assert sim.ok("help streams")["name"] == "streams"
    assert [g for g, cmds in sim.ok("help data")["groups"].items() if cmds] == ["data"]
