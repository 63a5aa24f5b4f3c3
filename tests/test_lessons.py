"""Lessons (issue 26, part 1): every shipped lesson completed by a scripted student on both backends, a wrong
student reaching the hints and then the answer, checks that read the session and never the text, progress kept
and resumed, the lesson file format's validation, JSON against the schema, and a lesson in a notebook."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudashell.backends.sim import SimBackend
from cudashell.commands.lessons import HINT_EVERY, first_hint
from cudashell.frontends.shell import Shell
from cudashell.teaching import lessons as L
from tests.conftest import Cush, make_backend

LESSONS = list(L.shipped())


@pytest.fixture(autouse=True)
def state_home(tmp_path, monkeypatch):
    """No test writes progress to this machine's state directory."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    return tmp_path / "xdg-state" / "cudashell"


def said(objs: list[dict]) -> list[dict]:
    """The lesson's own words among a line's JSON objects."""
    return [o["result"] for o in objs if o["kind"] == "lesson_step"]


@pytest.fixture(params=["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
def keeping(request, state_home):
    """A session that keeps lesson progress in the state directory, on each backend."""
    c = Cush(make_backend(request.param), state_dir=state_home)
    yield c
    c.shell.close()


@pytest.fixture
def sim_keeping(state_home):
    """A simulator session that keeps lesson progress in the state directory."""
    c = Cush(SimBackend(), state_dir=state_home)
    yield c
    c.shell.close()


def type_answer(cush, step: L.Step) -> list[dict]:
    out = []
    for line in step.answer:
        out += cush.run(line)
    return out


# ------------------------------------------------------------------ the shipped lessons
def test_there_is_a_lesson_for_each_article_in_english_and_chinese_each_under_15_minutes():
    assert set(LESSONS) == {"pinned", "flags", "zero-copy", "managed", "streams", "allocators"}
    articles = " ".join(L.load(path).article for path in L.shipped().values())
    assert all(seed in articles for seed in ("000", "001", "003", "004"))
    for name, path in L.shipped().items():
        lesson = L.load(path)
        assert 1 <= lesson.minutes <= 15, name
        texts = [lesson.title, lesson.intro, lesson.summary] + [t for s in lesson.steps for t in (s.goal, s.why) if t]
        assert all(set(t) == {"en", "zh"} for t in texts), name
        assert all(len(s.hints["zh"]) == len(s.hints["en"]) >= 1 for s in lesson.steps), name


@pytest.mark.parametrize("name", LESSONS)
def test_a_scripted_student_completes_the_lesson(keeping, name):
    """Typed by hand, the answers meet every goal in turn: ✓ for each step, no hint, no answer shown, and done."""
    cush = keeping
    lesson = L.load(L.shipped()[name])
    start = said(cush.run(f"lesson {name}"))
    assert start[0]["event"] == "start" and start[0]["step"] == 1 and start[0]["steps"] == len(lesson.steps)
    for i, step in enumerate(lesson.steps):
        words = said(type_answer(cush, step))
        assert [w["event"] for w in words] == ["passed"], (name, i + 1, words)
        assert words[0]["step"] == i + 1 and words[0]["skipped"] is False
        assert words[0]["done"] is (i + 1 == len(lesson.steps))
    assert cush.shell.session.lesson is None
    listed = {x["name"]: x for x in cush.ok("lesson list")["lessons"]}
    assert listed[name]["done_steps"] == len(lesson.steps)


@pytest.mark.parametrize("name", LESSONS)
def test_a_wrong_student_gets_each_hint_then_the_answer_at_every_step(cush, name):
    """Commands that miss the goal (and `help`, which is not a try) bring the hints one by one, then the answer;
    typing the answer then passes the step."""
    lesson = L.load(L.shipped()[name])
    cush.run(f"lesson {name}")
    for i, step in enumerate(lesson.steps):
        heard, tries = [], 0
        while not any(w["event"] == "answer" for w in heard):
            assert not said(cush.run("help alloc")), "looking up help is not a try"
            heard += said(cush.run("echo not what was asked"))
            tries += 1
            assert tries < 30, (name, i + 1, heard)
        hints = len(step.hints["en"])
        assert tries == first_hint(step) + HINT_EVERY * hints
        assert [w["event"] for w in heard] == ["hint"] * hints + ["answer"]
        assert [w["hint"] for w in heard[:-1]] == step.hints["en"]
        assert heard[-1]["answer"] == list(step.answer) and heard[-1]["step"] == i + 1
        assert [w["event"] for w in said(type_answer(cush, step))] == ["passed"]


def test_the_chinese_lesson_speaks_chinese(sim):
    start = said(sim.run("lesson pinned lang zh"))[0]
    lesson = L.load(L.shipped()["pinned"])
    assert start["lang"] == "zh" and start["goal"] == L.say(lesson.steps[0].goal, "zh")
    sim.shell.session.settings["format"] = "table"
    sim.shell.execute("alloc pageable 64MB as h; alloc device 64MB as d")
    text = sim.out.getvalue()
    assert "✓ 第 1/5 步：分配 64 MB 可分页主机内存" in text and "第 2/5 步：分配 64 MB 页锁定主机内存" in text


# ------------------------------------------------------------------ checks read the session, not the text
def test_a_step_passes_on_what_the_session_holds_however_it_was_typed(sim):
    sim.run("lesson pinned")
    assert not said(sim.run("echo alloc pageable 64MB as h; echo alloc device 64MB as d"))  # the text: no
    assert [w["event"] for w in said(sim.run("alloc pageable 32MB"))] == ["near", "hint"]  # too small: a third miss
    words = said(sim.run("alloc pageable 2^26 as mine; alloc device 128MB"))  # other words, other names: yes
    assert [w["event"] for w in words] == ["passed"] and words[0]["step"] == 1


def test_a_failed_command_is_a_try_and_an_error_can_be_the_goal(sim):
    sim.run("lesson flags")
    for step in L.load(L.shipped()["flags"]).steps[:5]:
        type_answer(sim, step)
    assert sim.shell.session.lesson.step == 5
    objs = sim.run("register nosuch")  # fails, but not with the code the step asks for
    assert not objs[0]["ok"] and not said(objs)
    objs = sim.run("register buf")
    assert objs[0]["error"]["code"] == "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"
    assert said(objs)[0]["event"] == "passed" and said(objs)[0]["done"] is True


def test_faster_compares_like_with_like(sim):
    """Step 3 of pinned: a pinned copy faster than a pageable one of the same size — a smaller pinned copy does
    not count."""
    sim.run("lesson pinned; alloc pageable 64MB as h; alloc device 64MB as d; alloc pinned 64MB as p")
    assert sim.shell.session.lesson.step == 2
    assert not said(sim.run("memcpy h d; memcpy p d 1MB"))
    assert said(sim.run("memcpy p d"))[0]["step"] == 3


def test_overlap_needs_two_streams_running_at_once(sim):
    sim.run("lesson streams")
    for step in L.load(L.shipped()["streams"]).steps[:3]:
        type_answer(sim, step)
    assert sim.shell.session.lesson.step == 3
    assert not said(sim.run("memcpy h[0:+32MB] d[0:+32MB] async stream s1; sync; launch spin 2000 stream s2; "
                            "sync"))  # one after the other
    words = said(sim.run("hold; memcpy h[0:+32MB] d[0:+32MB] async stream s1; launch spin 2000 stream s2; release; "
                         "sync"))
    assert words[-1]["event"] == "passed" and words[-1]["step"] == 4


# ------------------------------------------------------------------ the commands around a lesson
def test_hint_answer_skip_and_quit(sim_keeping, state_home):
    sim = sim_keeping
    sim.run("lesson zero-copy")
    step = L.load(L.shipped()["zero-copy"]).steps[0]
    assert sim.ok("lesson hint")["hint"] == step.hints["en"][0]
    assert sim.ok("lesson hint")["hint"] == step.hints["en"][1]
    assert sim.ok("lesson hint")["answer"] == list(step.answer)  # no hints left: the answer
    assert sim.ok("lesson answer")["answer"] == list(step.answer)
    words = said(sim.run("lesson skip"))
    assert [w["event"] for w in words] == ["passed", "skip"] and words[0]["skipped"] is True
    assert sim.buffer("z")["flags"] == ["mapped"]  # the shell typed the answer
    assert sim.ok("lesson")["event"] == "where" and sim.ok("lesson")["step"] == 2
    assert sim.ok("lesson quit")["event"] == "quit" and sim.shell.session.lesson is None
    for sub in ("hint", "answer", "skip", "quit"):
        assert sim.fails(f"lesson {sub}")["code"] == "NO_LESSON"
    saved = json.loads((state_home / "lessons.json").read_text())
    assert saved["current"] == "zero-copy" and saved["lessons"]["zero-copy"]["step"] == 1
    assert saved["lessons"]["zero-copy"]["skipped"] == [1]


def test_a_skip_whose_answer_fails_on_an_expected_error_still_passes(sim):
    """The answer of an error step holds `expect error`: typed by `lesson skip`, the error is part of it."""
    sim.run("lesson flags")
    for step in L.load(L.shipped()["flags"]).steps[:5]:
        type_answer(sim, step)
    objs = sim.run("lesson skip")
    assert all(o["ok"] for o in objs if o["kind"] != "lesson_step" and o["cmd"] != "register port"), objs
    assert said(objs)[0]["event"] == "passed" and said(objs)[0]["done"] is True


def test_progress_is_kept_and_lesson_resumes_rebuilding_the_session(state_home):
    def shell():
        out = io.StringIO()
        sh = Shell(SimBackend(), "test", out=out, err=out, json_mode=True, state_dir=state_home)
        return sh, out

    first, _ = shell()
    lesson = L.load(L.shipped()["pinned"])
    first.execute("lesson pinned")
    for step in lesson.steps[:2]:
        for line in step.answer:
            first.execute(line)
    first.close()
    again, out = shell()
    again.execute("lesson")  # no name: the lesson you were in
    objs = [json.loads(x) for x in out.getvalue().splitlines()]
    start = said(objs)[-1]
    assert start["event"] == "resume" and start["step"] == 3 and start["replayed"] == [
        "alloc pageable 64MB as h", "alloc device 64MB as d", "alloc pinned 64MB as p"]
    assert set(again.session.buffers) == {"h", "d", "p"} and again.session.lesson.tries == 0
    for step in lesson.steps[2:]:
        for line in step.answer:
            again.execute(line)
    assert again.session.lesson is None
    saved = json.loads((state_home / "lessons.json").read_text())
    assert saved["current"] is None and saved["lessons"]["pinned"]["done"] is True
    out.truncate(0), out.seek(0)
    again.execute("lesson")  # nothing to resume: the list
    listed = json.loads(out.getvalue().splitlines()[0])["result"]["lessons"]
    assert {x["name"]: x["done"] for x in listed}["pinned"] is True
    again.close()


def test_no_state_dir_keeps_no_progress(sim, state_home):
    sim.run("lesson pinned; lesson quit")
    assert not state_home.exists()


def test_a_cli_session_keeps_progress_in_the_environments_state_dir(tmp_path):
    from cudashell.frontends.cli import main
    from cudashell.frontends.environment import Environment

    out = io.StringIO()
    env = Environment(stdin=io.StringIO(), stdout=out, stderr=out, stdin_isatty=False, config_dir=tmp_path / "c",
                      state_dir=tmp_path / "s")
    assert main(["--backend", "sim", "-c", "lesson managed; alloc managed 16MB as m"], env) == 0
    saved = json.loads((tmp_path / "s" / "lessons.json").read_text())
    assert saved["lessons"]["managed"]["step"] == 1 and "✓ step 1/5" in out.getvalue()


def test_no_such_lesson_suggests_one(sim):
    err = sim.fails("lesson pined")
    assert err["code"] == "NO_SUCH_LESSON" and err["hint"] == "did you mean `lesson pinned`?"


def test_lesson_json_validates_against_the_schema(sim):
    jsonschema = pytest.importorskip("jsonschema")
    from cudashell.output.results import json_schema

    validator = jsonschema.Draft202012Validator(json_schema())
    objs = sim.run("lesson list; lesson streams")
    for _ in range(4):
        objs += sim.run("echo wrong")
    objs += sim.run("lesson hint; lesson answer; lesson skip; lesson; lesson quit")
    assert {o["kind"] for o in objs} >= {"lessons", "lesson_step"}
    assert {w["event"] for w in said(objs)} >= {"start", "hint", "answer", "passed", "skip", "where", "quit"}
    for o in objs:
        validator.validate(o)


# ------------------------------------------------------------------ a teacher's lesson file
GOOD = '''title.en = "Mine"
minutes = 3

[[step]]
goal.en = "Allocate pinned memory."
check.buffer = { kind = "pinned" }
hints.en = ["alloc pinned"]
answer = ["alloc pinned 4KB"]
'''


def test_a_teachers_lesson_file_runs(sim, tmp_path):
    (tmp_path / "mine.toml").write_text(GOOD)
    start = sim.ok(f"lesson {tmp_path / 'mine.toml'}")
    assert start["lesson"] == "mine" and start["steps"] == 1 and start["lang"] == "en"
    assert said(sim.run("alloc pinned 1MB"))[0]["done"] is True


BAD = '''title.en = "Broken"
colour = "red"

[[step]]
goal.en = "One"
check.bufer = { kind = "pinned" }
hints.en = ["h"]
answer = ["alloc pinned 4KB"]

[[step]]
goal.en = "Two"
check.last_result = { kind = "copy", blockng = false, src = { knd = "pinned" } }
hints.en = ["h"]
hints.zh = []
answer = ["memcpy p d asink"]
'''


def test_a_bad_lesson_file_is_one_error_naming_every_problem_where_it_is(sim, tmp_path):
    (tmp_path / "bad.toml").write_text(BAD)
    err = sim.fails(f"lesson {tmp_path / 'bad.toml'}")
    assert err["code"] == "BAD_LESSON" and err["hint"] == "docs/lessons.md describes the format"
    msg = err["message"]
    assert msg.startswith(f"{tmp_path / 'bad.toml'}:2: no key 'colour'")
    for part in ("bad.toml:6: step 1: check: no check 'bufer'",
                 "bad.toml:12: step 2: check.last_result: a copy result has no field 'blockng'",
                 "bad.toml:12: step 2: check.last_result.src: no buffer key 'knd'",
                 "bad.toml:14: step 2: hints.zh: 0 hints, but hints.en has 1",
                 "bad.toml:15: step 2: answer: `memcpy p d asink`: USAGE"):
        assert part in msg, msg
    assert sim.shell.session.lesson is None


def test_a_lesson_file_that_is_not_toml_says_where(sim, tmp_path):
    (tmp_path / "worse.toml").write_text('title.en = "x"\n[[step]\n')
    err = sim.fails(f"lesson {tmp_path / 'worse.toml'}")
    assert err["code"] == "BAD_LESSON" and f"{tmp_path / 'worse.toml'}:2: not TOML" in err["message"]


# ------------------------------------------------------------------ in a notebook
def test_a_lesson_runs_cell_by_cell_in_a_notebook(state_home):
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import get_ipython, start_ipython

    ip = start_ipython() or get_ipython()
    ip.run_line_magic("load_ext", "cudashell")
    try:
        start = ip.run_line_magic("cush", "--backend sim lesson managed")
        assert start.kind == "lesson_step" and start["event"] == "start"
        ip.run_cell_magic("cush", "", "alloc managed 16MB as m\nfill m 1 dtype float32")
        cush = ip.user_ns["cush"]
        assert cush.shell.session.lesson.step == 2
        assert [s.data["event"] for s in cush.shown if s.kind == "lesson_step"] == ["passed", "passed"]
        assert "✓ step 2/5" in cush.shown[-1]._repr_html_()
        assert json.loads((state_home / "lessons.json").read_text())["lessons"]["managed"]["step"] == 2
    finally:
        ip.run_line_magic("unload_ext", "cudashell")
        ip.user_ns.pop("cush", None)


def test_the_format_reference_documents_every_check_and_buffer_key():
    from cudashell.teaching.lessons import checks

    text = (Path(__file__).parent.parent / "docs" / "lessons.md").read_text()
    assert "`[[step]]`" in text
    for word in [*checks.CHECKS, *checks.BUFFER_KEYS, *(set(L.TOP_KEYS) - {"step"}), *L.STEP_KEYS, checks.GPU_SECONDS]:
        assert f"`{word}" in text, word


# ------------------------------------------------------------------ leaving and coming back in one session (review 26)
def no_errors(objs: list[dict]) -> bool:
    return all(o["ok"] for o in objs)


@pytest.mark.parametrize("kept", [True, False], ids=["state-dir", "no-state-dir"])
def test_quit_then_lesson_resumes_the_run_as_it_is_without_replaying(sim, sim_keeping, kept):
    sim = sim_keeping if kept else sim
    sim.run("lesson zero-copy")
    for _ in range(5):
        sim.run("lesson skip")
    sim.run("lesson quit")
    before = dict(sim.shell.session.buffers)
    objs = sim.run("lesson")
    assert no_errors(objs), objs
    start = said(objs)[-1]
    assert start["event"] == "resume" and start["step"] == 6 and start["replayed"] == []
    assert sim.shell.session.buffers == before and sim.shell.session.lesson.step == 5
    sim.shell.session.settings["format"] = "table"
    sim.shell.execute("lesson quit; lesson")
    assert "resuming at step 6/6, with the session as it is" in sim.out.getvalue()


def test_lang_on_the_running_lesson_only_changes_its_language(sim):
    sim.run("lesson zero-copy lang zh; lesson skip; lesson skip")
    objs = sim.run("lesson zero-copy lang en")
    assert no_errors(objs) and len(objs) == 1, objs
    where = said(objs)[0]
    assert where["event"] == "where" and where["lang"] == "en" and where["step"] == 3
    assert sim.shell.session.lesson.lang == "en"


def test_going_back_to_a_lesson_left_for_another_resumes_it_as_it_is(sim_keeping, state_home):
    sim = sim_keeping
    sim.run("lesson zero-copy; lesson skip; lesson skip")
    objs = sim.run("lesson pinned")
    assert no_errors(objs) and said(objs)[-1]["event"] == "start"
    type_answer(sim, L.load(L.shipped()["pinned"]).steps[0])  # pinned makes h and d; zero-copy's z stays
    objs = sim.run("lesson zero-copy")
    assert no_errors(objs), objs
    assert said(objs)[-1]["event"] == "resume" and said(objs)[-1]["step"] == 3 and said(objs)[-1]["replayed"] == []
    objs = sim.run("lesson pinned")  # and back again: pinned was kept too
    assert no_errors(objs) and said(objs)[-1]["step"] == 2
    assert json.loads((state_home / "lessons.json").read_text())["current"] == "pinned"


def test_a_new_shell_resuming_into_a_taken_name_is_refused_before_anything_runs(state_home):
    first = Shell(SimBackend(), "test", out=io.StringIO(), err=io.StringIO(), json_mode=True, state_dir=state_home)
    first.execute("lesson zero-copy; lesson skip; lesson skip")
    first.close()
    out = io.StringIO()
    again = Shell(SimBackend(), "test", out=out, err=out, json_mode=True, state_dir=state_home)
    again.execute("alloc pageable 1MB as z; lesson")
    err = json.loads(out.getvalue().splitlines()[-1])["error"]
    assert err["code"] == "NAME_TAKEN" and err["col"] == 26  # at `lesson`: no word after it to point at
    assert "`alloc pinned 4MB mapped as z` makes 'z': this session has a buffer named 'z'" in err["message"]
    assert err["hint"] == "`free z` first, resume in a new shell, or `lesson zero-copy restart`"
    assert again.session.lesson is None and list(again.session.buffers) == ["z"]
    out.truncate(0), out.seek(0)
    again.execute("free z; lesson")  # free: the answers run again
    objs = [json.loads(x) for x in out.getvalue().splitlines()]
    assert no_errors(objs) and said(objs)[-1]["event"] == "resume" and said(objs)[-1]["step"] == 3
    assert again.session.buffer("z").flags == frozenset({"mapped"})
    again.close()


def test_restart_alone_restarts_the_running_lesson(sim):
    sim.run("lesson managed; alloc managed 16MB as m")
    assert sim.shell.session.lesson.step == 1
    start = said(sim.run("lesson restart"))[-1]
    assert start["event"] == "start" and start["step"] == 1 and sim.shell.session.lesson.step == 0


def test_a_replay_that_fails_points_at_the_command_not_past_the_line(state_home):
    first = Shell(SimBackend(), "test", out=io.StringIO(), err=io.StringIO(), json_mode=True, state_dir=state_home)
    first.execute("lesson pinned; lesson skip; lesson skip")
    first.close()
    out = io.StringIO()
    again = Shell(SimBackend(), "test", out=out, err=out, json_mode=True, state_dir=state_home)
    again.execute("set pinlimit 1MB; lesson")  # the pinned allocation is refused
    err = [json.loads(x) for x in out.getvalue().splitlines()][-2]["error"]
    assert err["code"] == "SCRIPT_FAILED" and err["col"] == 19  # at `lesson`, not past the end of the line
    again.close()


def test_a_one_step_lesson_says_1_step(sim, tmp_path):
    (tmp_path / "mine.toml").write_text(GOOD)
    sim.shell.session.settings["format"] = "table"
    sim.shell.execute(f"lesson {tmp_path / 'mine.toml'}")
    assert "lesson mine: Mine — 1 step, about 3 minutes" in sim.out.getvalue()


@pytest.mark.parametrize("wait, passes", [
    ("sync stream s1", True), ("sync", True),  # the guide: any way of getting there counts (issue 37, item 9)
    ("event record e1 stream s1; event sync e1", True),  # an event recorded after the copy
    ("event record e1 stream s2; event sync e1", False),  # another stream's event: s1's copy not waited for
    ("sleep 50", False),  # the copy finished meanwhile, but the host never waited for it
])
def test_waiting_for_stream_s1_is_the_effect_however_it_is_reached(sim, wait, passes):
    """Streams step 3 (`wait for stream s1`) checks that the host waited for s1's work, not which call did it."""
    sim.run("lesson streams")
    for step in L.load(L.shipped()["streams"]).steps[:2]:
        type_answer(sim, step)
    assert not said(sim.run("memcpy h[0:+32MB] d[0:+32MB] async stream s1"))
    words = said(sim.run(wait))
    assert [w["step"] for w in words if w["event"] == "passed"] == ([3] if passes else []), words


def test_an_event_recorded_before_the_copy_is_not_a_wait_for_it(sim):
    sim.run("lesson streams")
    for step in L.load(L.shipped()["streams"]).steps[:2]:
        type_answer(sim, step)
    words = said(sim.run("event record early stream s1; memcpy h[0:+32MB] d[0:+32MB] async stream s1; "
                         "event sync early"))
    assert not [w for w in words if w["event"] == "passed"]
    assert said(sim.run("sync"))[0]["event"] == "passed"


def test_the_last_step_of_streams_passes_after_a_device_wide_sync(sim):
    sim.run("lesson streams")
    for step in L.load(L.shipped()["streams"]).steps[:5]:
        type_answer(sim, step)
    assert sim.shell.session.lesson.step == 5
    words = said(sim.run("sync; show h count 4"))
    assert words[-1]["event"] == "passed" and words[-1]["done"] is True


# ------------------------------------------------------------------ lesson files: what the review found (26)
def test_a_flag_no_buffer_can_have_is_a_problem_of_the_file(sim, tmp_path):
    (tmp_path / "flag.toml").write_text(GOOD.replace('{ kind = "pinned" }', '{ kind = "pinned", flags = ["mapped", '
                                                                             '"bogus"] }'))
    err = sim.fails(f"lesson {tmp_path / 'flag.toml'}")
    assert err["code"] == "BAD_LESSON"
    assert "flag.toml:6: step 1: check.buffer.flags: no alloc flag 'bogus' (flags: portable, mapped, " \
           "writecombined, global, host)" in err["message"]


def test_hints_in_chinese_may_be_left_out_and_english_is_shown(sim, tmp_path):
    (tmp_path / "mine.toml").write_text(GOOD)
    sim.run(f"lesson {tmp_path / 'mine.toml'} lang zh")
    assert sim.ok("lesson hint")["hint"] == "alloc pinned"
    text = (Path(__file__).parent.parent / "docs" / "lessons.md").read_text()
    assert "`hints.zh`, when given, has as many; left out, the English hints are shown" in text


def test_a_teachers_lesson_named_like_a_shipped_one_keeps_its_own_progress(sim_keeping, tmp_path, state_home):
    sim = sim_keeping
    (tmp_path / "pinned.toml").write_text(GOOD)
    sim.run(f"lesson {tmp_path / 'pinned.toml'}; lesson quit")
    saved = json.loads((state_home / "lessons.json").read_text())
    assert "pinned" not in saved["lessons"] and saved["current"] == str(tmp_path / "pinned.toml")
    assert saved["lessons"][str(tmp_path / "pinned.toml")]["step"] == 0
    assert said(sim.run("lesson pinned"))[-1]["steps"] == 5  # the shipped one: not the teacher's progress
    sim.run("lesson quit")
    assert said(sim.run(f"lesson {tmp_path / 'pinned.toml'}"))[-1]["steps"] == 1


def test_the_help_and_the_guide_say_ref_cannot_name_a_buffer(sim):
    """`compare ref …` reads `ref` as the reference figures, so a buffer cannot take the name; where names are
    described, that is said."""
    assert sim.fails("alloc pinned 1MB as ref")["code"] == "USAGE"
    assert "nor `ref` (`compare ref` is the reference figures)" in sim.ok("help alloc")["details"]
    guide = (Path(__file__).parent.parent / "docs" / "guide.md").read_text()
    kinds = guide[guide.index("## The kinds of memory"):guide.index("## Pointer pairs")]
    assert "it cannot be a keyword (`as`, `async`, `stream`, …) nor `ref`" in kinds


# ------------------------------------------------------------------ a near miss, and the answer from where the student is (37)
def test_a_near_miss_is_said_at_once_and_skip_and_answer_work_from_it(sim):
    """Issue 37 item 5: `alloc pageable 64 as h` (meant 64MB) in the pinned lesson: the step says what differs,
    once; `lesson answer` and `lesson skip` free the wrong-size h first and say so — no NAME_TAKEN."""
    sim.run("lesson pinned")
    near = said(sim.run("alloc pageable 64 as h"))
    assert [w["event"] for w in near] == ["near"]
    assert near[0]["near"] == [{"what": "h", "key": "size", "have": "64 B", "want": "64 MiB", "bound": "at_least",
                                "buffer": True}]
    assert not said(sim.run("alloc device 64MB as d"))  # said once, and d is what the step wants
    answer = sim.ok("lesson answer")
    assert answer["answer"] == ["free h; alloc pageable 64MB as h"]
    assert answer["fitted"] == [{"name": "h", "action": "freed", "was": "pageable 64 B"},
                                {"name": "d", "action": "kept", "was": "device 64 MiB"}]
    objs = sim.run("lesson skip")
    assert all(o["ok"] for o in objs), objs
    assert [w["event"] for w in said(objs)] == ["passed", "skip"] and said(objs)[0]["step"] == 1
    assert sim.buffer("h")["size"] == 64 << 20


def test_a_near_miss_of_a_result_names_the_fields_that_differ(sim):
    sim.run("lesson streams")
    for step in L.load(L.shipped()["streams"]).steps[:2]:
        type_answer(sim, step)
    near = said(sim.run("memcpy h[0:+32MB] d[0:+32MB]"))[0]["near"]
    assert [(m["what"], m["key"], m["have"], m["want"]) for m in near] == [
        ("copy", "async", "false", "true"), ("copy", "blocking", "true", "false")]
    assert not said(sim.run("sleep 1"))  # not a copy: nothing more to say


def test_skip_keeps_a_stream_already_made_and_makes_the_rest(sim):
    sim.run("lesson streams")
    type_answer(sim, L.load(L.shipped()["streams"]).steps[0])
    sim.run("stream create nonblocking as s1")  # taken, but of another kind than the answer makes
    objs = sim.run("lesson skip")
    assert all(o["ok"] for o in objs), objs
    assert [o["cmd"] for o in objs if o["kind"] != "lesson_step"] == [
        "stream destroy s1", "stream create as s1", "stream create as s2"]


def test_a_near_miss_and_the_fitted_skip_as_the_student_reads_them(tmp_path):
    r = subprocess.run([sys.executable, "-m", "cudashell", "--backend", "sim", "-c",
                        "lesson pinned; alloc pageable 64 as h; alloc device 64MB as d; lesson skip"],
                       capture_output=True, text=True, timeout=60, env={**os.environ, "XDG_STATE_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not yet: h's size is 64 B where the goal wants at least 64 MiB" in r.stdout
    assert "h was taken (pageable 64 B): the answer freed it first" in r.stdout
    assert "✓ step 1/5" in r.stdout and "NAME_TAKEN" not in r.stdout + r.stderr
