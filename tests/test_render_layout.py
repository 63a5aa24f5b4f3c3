"""How text is laid out on a terminal: charts, tables and profile rows are never wrapped into pieces (a chart too wide
for the terminal is narrowed whole), text breaks only between words (C between tokens, a number stays with its unit,
a bracket with the word after it), the info table's values line up, and `set expanded` shows a table one field a
line when asked or when it does not fit."""

from __future__ import annotations

import re

import pytest

from cudashell.backends.sim import SimBackend
from cudashell.output import render

from .conftest import Cush, text_run

WORK = ["alloc pinned 64MB as h", "alloc device 64MB as d", "memcpy h d async", "launch increment d", "sync"]


# ------------------------------------------------------------------ wrapping
def test_a_timeline_wider_than_the_terminal_is_narrowed_whole_with_a_note():
    text = text_run(WORK + ["timeline width 200"], 80)
    chart = text[text.index("timeline of"):].splitlines()
    assert all(len(line) <= 80 for line in chart)
    assert chart[1] == "(width 200 does not fit the terminal: drawn 67 columns wide)"
    rows = [line for line in chart if line.startswith("  stream 0 ") or line.startswith("  compute ")]
    assert len(rows) == 2 and all(line.endswith("|") and len(line) == 80 for line in rows)


def test_a_timeline_fills_the_terminal_and_keeps_its_asked_width_where_it_fits_or_in_json():
    wide = text_run(WORK + ["timeline", "timeline width 40"], 120)
    rows = [line for line in wide.splitlines() if line.startswith("  stream 0 ")]
    assert [len(r) for r in rows] == [120, 12 + 40 + 1]
    assert "does not fit" not in wide
    c = Cush(SimBackend())
    for line in WORK:
        c.ok(line)
    c.shell.session.settings["width"] = 80
    got = c.ok("timeline width 200")
    assert got["width"] == 200 and len(got["rows"][0]["cells"]) == 200 and "asked_width" not in got


def test_explain_breaks_c_only_after_a_comma_or_a_space_and_indents_what_follows():
    from cudashell.export.cemit import explain_lines

    lines = explain_lines('CHECK(cudaMemcpy(b_d, b_h, 67108864, cudaMemcpyHostToDevice));\n'
                          'printf("a, b  c", x);', "cuMemcpy, cuLaunchKernel", 40)
    assert lines == ["  C:      CHECK(cudaMemcpy(b_d, b_h,", "              67108864,",
                     "              cudaMemcpyHostToDevice));", '          printf("a, b  c", x);',
                     "  driver: cuMemcpy, cuLaunchKernel"]
    text = text_run(["alloc pinned 64MB as h", "alloc device 64MB as d", "explain on", "memcpy h d"], 60)
    assert "              cudaMemcpyHostToDevice));" in text.splitlines()
    assert all(len(line) <= 60 for line in text.splitlines())


def test_error_lines_wrap_between_words_at_the_prompt():
    text = text_run(["free nosuchbuffer_with_a_long_name"], 40)
    lines = text.splitlines()
    assert len(lines) > 1 and all(len(line) <= 40 for line in lines)
    one = text_run(["free nosuchbuffer_with_a_long_name"], 0).strip()
    assert " ".join(x.strip() for x in lines) == one  # the same words, none cut


def test_a_title_a_result_draws_itself_wraps_between_words_and_its_table_stays_whole():
    text = text_run(["bench latency rounds 10"], 40)
    lines = text.splitlines()
    assert lines[0] == "bench latency (modeled): host time of"
    assert lines[1].strip() == "one round, 10 rounds each"
    table = [line for line in lines if line.startswith("operation")]
    assert table  # the table is still a table: its header row is one line


def test_a_table_cell_wraps_between_words_never_inside_one():
    table = render.fit([["pinned writecombined", "0x7f5b00000000"]], ["kind", "pointer"], "simple", 20)
    assert table.splitlines()[2:] == ["pinned         0x7f5b00000000", "writecombined"]


def test_a_number_and_its_unit_stay_on_one_line():
    assert render.wrap(["launch took 12 ms, moved 64 MiB"], 14) == ["launch took", "    12 ms,", "    moved", "    64 MiB"]


def test_a_table_cell_keeps_a_number_with_its_unit_and_a_bracket_with_its_word():
    doctor = text_run(["doctor"], 80)
    assert "belongs to (" not in doctor and "79.18 GiB" in doctor
    assert all(not line.rstrip().endswith("(") for line in doctor.splitlines())
    devices = text_run(["devices"], 80)
    assert all(not line.rstrip().endswith("(") for line in devices.splitlines())
    assert "(simulated;" in devices
    bench = text_run(["bench alloc pinned device sizes 4KB"], 40)
    assert not any(line.strip() in ("ms", "s") for line in bench.splitlines())
    assert render._cell("registered(mapped),portable", 12) == "registered(\nmapped),\nportable"


def test_an_expanded_record_keeps_a_number_with_its_unit():
    text = text_run(["set expanded on", "alloc device 1MB as d", "ls"], 29)
    assert "size       | 1 MiB\n           | (1048576 B)" in text


def test_wrap_takes_an_indent_for_the_lines_it_continues():
    assert render.wrap(["alpha beta 12 MiB gamma"], 12, indent="  ") == ["alpha beta", "  12 MiB", "  gamma"]


# ------------------------------------------------------------------ profile rows stay whole
def test_profile_rows_are_not_wrapped_at_80_columns():
    text = text_run(["alloc managed 64MB as m", "prefetch m device", "sync", "profile"], 80)
    lines = text.splitlines()
    row = next(line for line in lines if "[Unified Memory prefetch HtoD]" in line)
    assert row.endswith("  [Unified Memory prefetch HtoD]")
    assert not any(line.strip() in ("prefetch HtoD]", "[Unified Memory") for line in lines)


# ------------------------------------------------------------------ info
def test_info_labels_and_values_line_up_on_every_row():
    text = text_run(["alloc pinned 1MB mapped", "info p0", "context create as a_long_context_name", "info p0"])
    for block in text.split("p0: pinned 1 MiB (1048576 B), flags mapped, ready\n")[1:]:
        rows = [line for line in block.splitlines() if line.startswith("  ") and not line.startswith("    ")]
        starts = {re.match(r"  \S.*?  +(?=\S)", line).end() for line in rows if "0x" in line}
        assert len(rows) >= 8 and len(starts) == 1, rows
        assert any(line.startswith("  kernel in gpu0 ") for line in rows)


# ------------------------------------------------------------------ expanded
def test_set_expanded_shows_a_table_one_field_a_line_when_asked_or_when_it_does_not_fit():
    made = ["alloc pinned 64MB mapped portable as h", "alloc device 64MB as d"]
    on = text_run(made + ["set expanded on", "ls"], 120)
    assert "-[ RECORD 1 ]" in on and "\nname       | h\n" in on and "\ndevice ptr | same (UVA)\n" in on
    auto_narrow = text_run(made + ["set expanded auto", "ls"], 40)
    assert "-[ RECORD 2 ]" in auto_narrow and all(len(x) <= 40 for x in auto_narrow.splitlines()[-16:])
    auto_wide = text_run(made + ["set expanded auto", "ls"], 120)
    assert "RECORD" not in auto_wide and "name    kind" in auto_wide
    assert "RECORD" not in text_run(made + ["ls"], 40)
    assert Cush(SimBackend()).fails("set expanded sideways")["code"] == "USAGE"


def _zh_texts() -> list[str]:
    """Every Chinese text the shipped lessons show: titles, introductions, goals, hints, whys, summaries."""
    from cudashell.teaching.lessons import load, say, shipped

    out = []
    for path in shipped().values():
        lesson = load(path)
        out += [say(t, "zh") for t in (lesson.title, lesson.intro, lesson.summary)]
        for step in lesson.steps:
            out += [say(step.goal, "zh"), say(step.why, "zh"), *step.hints.get("zh", [])]
    return [line for t in out for line in t.split("\n") if line]


@pytest.mark.parametrize("width", [60, 80, 100, 120])
def test_chinese_wraps_by_display_width_keeps_closing_punctuation_and_commands_whole(width):
    """Item 6 (issue 37): a Chinese character takes two columns; no line starts with `，` `。` `）`; a command in
    backticks is never split across lines (a student would mistype it)."""
    from wcwidth import wcswidth

    texts = _zh_texts()
    assert len(texts) > 50
    for text in texts:
        lines = render.wrap([text], width)
        assert all(wcswidth(line) <= width for line in lines), lines
        assert not any(line.strip()[0] in "，。、；：！？）」』》" for line in lines[1:]), lines
        if all(len(span) <= width for span in re.findall(r"`[^`]+`", text)):  # a longer one breaks at its spaces
            assert all(line.count("`") % 2 == 0 for line in lines), lines
        assert "".join(x.strip() for x in lines).replace(" ", "") == text.replace(" ", "")  # nothing lost


def test_a_command_in_backticks_moves_whole_to_the_next_line():
    lines = render.wrap(["一" * 35 + "`lesson answer` 答案。"], 80)
    assert lines == ["一" * 35, "    `lesson answer` 答案。"]
    assert render.wrap(["一" * 40 + "，二"], 80) == ["一" * 39, "    一，二"]  # the comma stays with its character
