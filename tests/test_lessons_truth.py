"""What the lessons' and demos' words claim is what their steps show (issue 37): the streams lesson's "look too early"
and "now it has landed" print different bytes, and no text states one machine's behaviour as CUDA's rule."""

from __future__ import annotations

import pytest

from cudashell.teaching import lessons as L


@pytest.fixture(autouse=True)
def state_home(tmp_path, monkeypatch):
    """No test writes lesson progress to this machine's state directory."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))


def shown_at_each_step(cush, name: str) -> list[list[dict]]:
    """Each step's answer typed in turn: the `show` results of each step, after checking that it passed."""
    lesson = L.load(L.shipped()[name])
    cush.run(f"lesson {name}")
    steps = []
    for i, step in enumerate(lesson.steps):
        objs = [o for line in step.answer for o in cush.run(line)]
        passed = [o["result"] for o in objs if o["kind"] == "lesson_step" and o["result"]["event"] == "passed"]
        assert passed and passed[0]["step"] == i + 1, (name, i + 1, objs)
        steps.append([o["result"] for o in objs if o["kind"] == "show"])
    return steps


def test_looking_too_early_shows_other_bytes_than_after_the_copy_has_landed(cush):
    """Steps 5 and 6 of the streams lesson: before the copy lands `show h` prints what the host wrote (255s) and
    says h is pending; after `sync stream s1` it prints the device's bytes and nothing is pending."""
    steps = shown_at_each_step(cush, "streams")
    early, landed = steps[4][-1], steps[5][-1]
    assert early["pending"] and not landed["pending"]
    assert early["values"] == [255] * 4
    assert landed["values"] == [0] * 4


def test_the_streams_lesson_tells_the_student_to_mark_h_first_in_both_languages():
    step = L.load(L.shipped()["streams"]).steps[4]
    assert step.answer[0] == "fill h 255"
    assert all("fill h 255" in step.goal[lang] and "fill h 255" in step.hints[lang][-1] for lang in ("en", "zh"))
