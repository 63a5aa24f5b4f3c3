"""What the lessons' and demos' words claim is what their steps show (issue 37): the streams lesson's "look too early"
and "now it has landed" print different bytes, and no text states one machine's behaviour as CUDA's rule."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.teaching import lessons as L
from tests.conftest import Cush, text_run


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


# ------------------------------------------------------------------ CUDA claims: measured, or said where they hold
def texts(lang: str) -> dict[str, str]:
    """Every lesson's and demo's words in one language, by where they are, each run of white space one space."""
    from cudashell.teaching.shipped import DEMO_DIR, demos

    out = {}
    for name, path in L.shipped().items():
        lesson = L.load(path)
        words = [lesson.title, lesson.intro, lesson.summary] + [t for s in lesson.steps for t in (s.goal, s.why) if t]
        out[f"lesson {name}"] = "\n".join([w[lang] for w in words] + [h for s in lesson.steps for h in s.hints[lang]])
    for name in demos():
        lines = (DEMO_DIR / f"{name}.cush").read_text().splitlines()
        out[f"demo {name}"] = "\n".join(line[7:] for line in lines if line.startswith(f"say {lang} "))
    return {where: " ".join(text.split()) for where, text in out.items()}  # as wrapped: a line break is a space


# Words that stated one machine's behaviour, or a generation's, as CUDA's rule (what issue 37 found).
UNQUALIFIED = {"en": ["crawl", "since Kepler", "before Kepler", "the article measured", "the article: ~11",
                      "the article: 3.1", "over 2 MiB, the driver must"],
               "zh": ["读回来非常慢", "Kepler 以后", "文章中 100 次往返", "文章：2^20", "文章在 H100", "超过 2 MiB 时，驱动必须"]}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_lesson_or_demo_states_one_machines_behaviour_as_cudas_rule(lang):
    found = [(where, words) for where, text in texts(lang).items() for words in UNQUALIFIED[lang] if words in text]
    assert not found


@pytest.mark.parametrize("lang, bare_metal, vm_figure, may_sync", [
    ("en", "bare-metal x86", "324 and 340 ms", "may be synchronous"),
    ("zh", "物理机（bare-metal）的 x86", "324 和 340 ms", "可能是同步的")])
def test_write_combined_reads_and_pageable_async_copies_say_when_and_where(lang, bare_metal, vm_figure, may_sync):
    """The flags lesson and the host-alloc-flags demo say when write-combined reads are slow and what the H100 host
    measured; the pinned lesson says what the documentation promises and what the H100 did."""
    said = texts(lang)
    for where in ("lesson flags", "demo host-alloc-flags"):
        assert bare_metal in said[where] and vm_figure in said[where], where
    assert may_sync in said["lesson pinned"] and "2 MiB" in said["lesson pinned"] and "H100" in said["lesson pinned"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_pageable_memory_is_unreachable_only_where_pageable_memory_access_is_0(lang):
    said = texts(lang)
    for where in ("lesson zero-copy", "lesson pinned", "demo uva"):
        assert "pageableMemoryAccess" in said[where] and ("is 0" in said[where] or "为 0" in said[where]), where


@pytest.mark.parametrize("profile, engines", [(None, 3), ("one-copy-engine", 1)])
def test_demo_streams_shows_this_gpus_copy_engine_count(profile, engines):
    """The copy-engine count the narration talks of is the GPU's asyncEngineCount, shown by the demo itself."""
    shown = text_run(["demo streams"], width=120, profile=profile)
    assert re.search(rf"^  async_engine_count +{engines}$", shown, re.M), shown[-3000:]
    assert "asyncEngineCount" in shown and "Fermi Teslas had two" in shown


@pytest.mark.parametrize("changes", [{}, {"pageable_memory_access": True, "async_engine_count": 1}])
def test_device_devices_and_doctor_report_pageable_memory_access_and_copy_engines_as_the_profile_says(changes):
    backend = SimBackend(replace(Profile.load(None), **changes))
    cush = Cush(backend)
    device, [listed] = cush.ok("device"), cush.ok("devices")["devices"]
    found = {f["topic"]: f["value"] for f in cush.ok("doctor")["findings"]}
    pageable, engines = changes.get("pageable_memory_access", False), changes.get("async_engine_count", 3)
    assert device["pageable_memory_access"] is pageable and device["async_engine_count"] == engines
    assert listed["pageable_memory_access"] is pageable and listed["async_engine_count"] == engines
    assert found["pageableMemoryAccess"] == ("yes" if pageable else "no")
    assert found["asyncEngineCount"] == str(engines)
    cush.shell.close()


def test_devices_says_each_gpus_copy_engines_and_pageable_access_in_80_columns():
    shown = text_run(["devices"], width=80, profile="one-copy-engine")
    assert "GPU 0: asyncEngineCount 1 (1 copy engine: copies both ways take turns on it), pageableMemoryAccess 0" \
        in " ".join(shown.split())
    assert all(len(line) <= 80 for line in shown.splitlines())
    pair = text_run(["devices"], width=120, profile="two-h200")
    assert "GPU 0, 1: asyncEngineCount 3 (3 copy engines: each direction has its own), pageableMemoryAccess 0" \
        in " ".join(pair.split())
