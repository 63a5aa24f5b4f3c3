"""`cudashell grade`: the example in docs/grading/ scores its three submissions as intended on both backends, the same
on two simulator profiles, and a submission that escapes its folder, loops or crashes costs only its checks."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from xml.etree import ElementTree

import pytest

from cudashell.backends.profile import BUILTIN
from cudashell.backends.sim import SimBackend
from cudashell.frontends.cli import main
from cudashell.frontends.environment import Environment, ExitStatus
from cudashell.frontends.grade import DEFAULT_TIME_LIMIT
from cudashell.frontends.shell import Shell
from tests.conftest import confined_shell, gpu_missing

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "grading"
CHECKS = str(EXAMPLE / "checks.cush")
SUBMISSIONS = [str(EXAMPLE / who) for who in ("right", "slow", "wrong")]


def grade(*argv: str, tmp_path: Path) -> tuple[ExitStatus, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = Environment(stdin=None, stdout=out, stderr=err, stdin_isatty=False, stdout_isatty=False,
                      config_dir=tmp_path / "config", state_dir=tmp_path / "state")
    return main(["grade", *argv], env), out.getvalue(), err.getvalue()


def grades(*argv: str, tmp_path: Path) -> tuple[ExitStatus, list[dict]]:
    code, out, err = grade(*argv, "--json", tmp_path=tmp_path)
    lines = [json.loads(x) for x in out.splitlines()]
    assert all(x["kind"] == "grade" and x["ok"] for x in lines), (out, err)
    return code, [x["result"] for x in lines]


def outcome(g: dict) -> list[tuple]:
    """What a grade decides, check by check (not the figures its messages quote, nor wall times)."""
    return [(s["title"], c["line"], c["status"], c["code"], c["score"]) for s in g["sections"] for c in s["checks"]]


def _example(backend: str, tmp_path: Path) -> None:
    code, (right, slow, wrong) = grades("--backend", backend, CHECKS, *SUBMISSIONS, tmp_path=tmp_path)
    assert [(g["score"], g["total"], g["passed"]) for g in (right, slow, wrong)] == \
        [(100, 100, True), (60, 100, True), (50, 100, False)]
    assert code == ExitStatus.ERROR  # one submission is below the default 60%
    assert outcome(right) == [("The script runs", 8, "passed", None, 10), ("The result is right", 18, "passed", None, 50),
                              ("The copy is fast", 36, "passed", None, 40)]
    assert outcome(slow)[2] == ("The copy is fast", 36, "failed", "EXPECT_FAILED", 0)
    assert outcome(wrong)[1] == ("The result is right", 18, "failed", "EXPECT_FAILED", 0)
    assert "first difference at byte" in wrong["sections"][1]["checks"][0]["message"]
    assert right["backend"] == backend and right["timing"] == ("modeled" if backend == "sim" else "measured")


def test_the_example_grades_right_slow_and_wrong_on_the_simulator(tmp_path):
    _example("sim", tmp_path)


@pytest.mark.gpu
def test_the_example_grades_right_slow_and_wrong_on_the_gpu(tmp_path):
    if gpu_missing():
        pytest.skip(f"no GPU: {gpu_missing()}")
    _example("cuda", tmp_path)


def test_grades_on_the_simulator_do_not_depend_on_the_profile_where_the_checks_are_about_order(tmp_path):
    """The copy check asks which copy is faster, not how fast: a GPU with one copy engine, or one without UVA,
    grades the example as the H100 does."""
    _, h100 = grades("--backend", "sim", "--sim-profile", "h100", CHECKS, *SUBMISSIONS, tmp_path=tmp_path)
    for profile in ("one-copy-engine", "no-uva"):
        _, other = grades("--backend", "sim", "--sim-profile", profile, CHECKS, *SUBMISSIONS, tmp_path=tmp_path)
        assert [outcome(g) for g in other] == [outcome(g) for g in h100]
        assert [g["score"] for g in other] == [100, 60, 50]


def test_the_json_lines_validate_against_the_published_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from cudashell.output.results import json_schema

    _, out, _ = grade("--backend", "sim", "--json", CHECKS, SUBMISSIONS[2], tmp_path=tmp_path)
    line = json.loads(out)
    assert list(jsonschema.Draft202012Validator(json_schema()).iter_errors(line)) == []
    assert line["cmd"].startswith("cudashell grade --backend sim --json")


def test_the_score_table_and_the_threshold_decide_the_exit_status(tmp_path):
    code, out, _ = grade("--backend", "sim", CHECKS, SUBMISSIONS[1], tmp_path=tmp_path)
    assert code == ExitStatus.SUCCESS
    assert "total 60/100 points (60%): passed (passing takes 60)" in out
    assert "0/40  ✗ EXPECT_FAILED: c0→c1 took" in out
    code, out, _ = grade("--backend", "sim", "--pass", "61%", CHECKS, SUBMISSIONS[1], tmp_path=tmp_path)
    assert code == ExitStatus.ERROR and "not passed (passing takes 61)" in out
    code, _, _ = grade("--backend", "sim", "--pass", "50", CHECKS, *SUBMISSIONS, tmp_path=tmp_path)
    assert code == ExitStatus.SUCCESS
    code, _, err = grade("--backend", "sim", "--pass", "101%", CHECKS, SUBMISSIONS[0], tmp_path=tmp_path)
    assert code == ExitStatus.USAGE and "USAGE: --pass 101% is outside 0..100 points" in err


def test_junit_xml_has_a_case_per_check_and_a_failure_per_failed_expect(tmp_path):
    xml = tmp_path / "grade.xml"
    grade("--backend", "sim", "--junit", str(xml), CHECKS, *SUBMISSIONS, tmp_path=tmp_path)
    suites = ElementTree.parse(xml).getroot().findall("testsuite")
    assert [(s.get("tests"), s.get("failures"), s.get("errors")) for s in suites] == [("3", "0", "0"), ("3", "1", "0"),
                                                                                      ("3", "1", "0")]
    props = {p.get("name"): p.get("value") for p in suites[2].find("properties")}
    assert (props["score"], props["total"], props["passed"]) == ("50", "100", "false")
    failure = suites[2].findall("testcase")[1].find("failure")
    assert failure.get("type") == "EXPECT_FAILED" and "out and want differ" in failure.get("message")


# ------------------------------------------------------------------ a submission that misbehaves
BAD_CHECKS = """\
run setup.cush
section "escapes with run" points 10
run escape.cush
expect ok
section "loads a kernel outside" points 10
kernel load /etc/passwd
expect ok
section "includes a file outside" points 10
kernel load inc.cu
launch inc d grid 1 block 1
expect ok
section "loops" points 10
run loop.cush
expect ok
expect ok points 0
section "crashes" points 10
run crash.cush
expect equal h h
section "behaves" points 10
alloc pinned 4KB as p
expect ok
"""


def _misbehaving(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "checks.cush").write_text(BAD_CHECKS)
    (tmp_path / "outside.cush").write_text("alloc pinned 4KB\n")
    (tmp_path / "secret.h").write_text("#define SECRET 42\n")
    sub = tmp_path / "student"
    sub.mkdir()
    (sub / "setup.cush").write_text("alloc device 4KB as d\nalloc pinned 4KB as h\n")
    (sub / "escape.cush").write_text("run ../outside.cush\n")
    (sub / "inc.cu").write_text('#include "../secret.h"\n__global__ void inc(int *a) { a[0] = SECRET; }\n')
    (sub / "loop.cush").write_text("kernel define forever <<< __global__ void forever(int *a) { while (a[0] == 0) { } } >>>\n"
                                   "launch forever d grid 1 block 1\nsync\n")
    (sub / "crash.cush").write_text("memset d 0\n")
    return tmp_path / "checks.cush", sub


def test_a_submission_that_escapes_loops_or_crashes_scores_zero_there_and_grading_goes_on(tmp_path, monkeypatch):
    checks, sub = _misbehaving(tmp_path)

    def crash(*args, **kwargs):  # the section's process dies as a segfault would end it (the grader is forked)
        os._exit(11)
    monkeypatch.setattr(SimBackend, "memset", crash)
    code, (g,) = grades("--backend", "sim", "--time-limit", "3", str(checks), str(sub), tmp_path=tmp_path)
    checks_ = {s["title"]: s["checks"] for s in g["sections"]}
    escape, = checks_["escapes with run"]
    assert (escape["status"], escape["code"], escape["score"]) == ("failed", "EXPECT_FAILED", 0)
    assert "escape.cush:1:5: OUTSIDE_SUBMISSION: ../outside.cush is outside the submission's folder" in escape["message"]
    kernel, = checks_["loads a kernel outside"]
    assert "OUTSIDE_SUBMISSION: /etc/passwd is outside" in kernel["message"]
    include, = checks_["includes a file outside"]  # the kernel load failed, so the launch after it is not run
    assert include["code"] == "OUTSIDE_SUBMISSION" and "not reached: line 9 failed" in include["message"]
    assert "#include '../secret.h' is outside" in include["message"]
    loop, after = checks_["loops"]
    assert (loop["status"], loop["code"], loop["score"]) == ("error", "TIME_LIMIT", 0)
    assert 3 <= loop["seconds"] < 10  # stopped at the limit, not by the simulator's own 10 s runaway guard
    assert after["code"] == "TIME_LIMIT" and after["message"].startswith("not reached")
    crashed, = checks_["crashes"]
    assert (crashed["status"], crashed["code"]) == ("error", "CHECK_CRASHED")
    assert "exit status 11" in crashed["message"]
    behaves, = checks_["behaves"]
    assert behaves["status"] == "passed"
    assert (g["score"], g["total"], code) == (10, 60, ExitStatus.ERROR)


def test_the_shell_refuses_files_outside_its_root_and_opens_those_inside(tmp_path):
    sub = tmp_path / "sub"
    (sub / "k").mkdir(parents=True)
    (sub / "ok.cush").write_text("alloc pinned 4KB\n")
    (sub / "k" / "two.cu").write_text("__global__ void two(int *a) { a[0] = 2; }\n")
    (sub / "link.cush").symlink_to(tmp_path / "out.cush")
    (tmp_path / "out.cush").write_text("alloc pinned 4KB\n")
    os.chdir(sub)
    try:
        shell = confined_shell(SimBackend(), sub)
        for line in ("run ../out.cush", "run link.cush", "kernel load /etc/passwd", "save ../saved.cush",
                     "output ../o.txt", "export c /tmp/x.cu", "kernel define t <<< #include \"../../h.h\"\n"
                     "__global__ void t(int *a) { } >>>"):
            assert shell.execute(line) is False, line
            assert shell.last_error.code == "OUTSIDE_SUBMISSION", (line, shell.last_error)
        assert shell.execute("run ok.cush; kernel load k/two.cu; save kept.cush; output off")
        assert (sub / "kept.cush").is_file()
        shell.close()
    finally:
        os.chdir(tmp_path)


def test_a_checks_file_that_cannot_be_graded_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.cush"
    bad.write_text('section "a" points 10\nexpect ok points 20\n')
    code, _, err = grade("--backend", "sim", str(bad), str(tmp_path), tmp_path=tmp_path)
    assert code == ExitStatus.USAGE
    assert err.strip() == (f"{bad}:1:1: USAGE: section 'a' is worth 10 points, and its checks' own points add up to 20 "
                           "— hint: leave `points` off some of its expect lines to share the rest, or fix the numbers")
    bad.write_text("alloc pinned 4KB\nallok pinned 4KB\n")
    code, _, err = grade("--backend", "sim", str(bad), str(tmp_path), tmp_path=tmp_path)
    assert code == ExitStatus.USAGE and f"{bad}:2:1: UNKNOWN_COMMAND: unknown command 'allok'" in err
    bad.write_text("expect ok\n")
    code, _, err = grade("--backend", "sim", str(bad), str(tmp_path), tmp_path=tmp_path)
    assert code == ExitStatus.USAGE and "no check is worth any points" in err
    code, _, err = grade("--backend", "sim", CHECKS, str(tmp_path / "nobody"), tmp_path=tmp_path)
    assert code == ExitStatus.USAGE and "NO_SUCH_FILE: submission" in err and "is not a folder" in err


def test_points_are_shared_within_a_section_and_the_lines_before_the_first_section_run_in_each(tmp_path):
    checks = tmp_path / "checks.cush"
    checks.write_text('alloc pinned 4KB as p\nsection "two shares" points 9\nfree p\nexpect ok\nexpect ok points 3\n'
                      'expect error CUDA_ERROR_INVALID_VALUE\nsection "again" points 1\nfree p\nexpect ok\n')
    code, (g,) = grades("--backend", "sim", str(checks), str(tmp_path), tmp_path=tmp_path)
    assert [(c["points"], c["score"], c["status"]) for s in g["sections"] for c in s["checks"]] == \
        [(3.0, 3.0, "passed"), (3.0, 3.0, "passed"), (3.0, 0.0, "failed"), (1.0, 1.0, "passed")]
    assert code == ExitStatus.SUCCESS  # 7 of 10


# ------------------------------------------------------------------ the review's findings (issue 26)
SECTION_A = 'section "a" points '


def test_points_are_a_number_of_points_not_a_size(tmp_path):
    checks = tmp_path / "checks.cush"
    for bad in ("4KB", "-1", "nan", "ten"):
        checks.write_text(f'section "a" points {bad}\nexpect ok\n')
        code, _, err = grade("--backend", "sim", str(checks), str(tmp_path), tmp_path=tmp_path)
        assert code == ExitStatus.USAGE
        assert err.strip() == (f"{checks}:1:{len(SECTION_A) + 1}: USAGE: bad points '{bad}' — hint: "
                               "points are a number ≥ 0, such as 10 or 2.5"), err
    checks.write_text('section "a" points 1.5\nexpect ok\nexpect ok points 0.5\n')
    code, (g,) = grades("--backend", "sim", str(checks), str(tmp_path), tmp_path=tmp_path)
    assert (g["total"], [c["points"] for c in g["sections"][0]["checks"]]) == (1.5, [1.0, 0.5])


def test_junit_xml_stays_valid_whatever_the_submission_prints(tmp_path):
    checks = tmp_path / "checks.cush"
    checks.write_text('section "a" points 1\nrun bad.cush\nexpect ok\n')
    (tmp_path / "bad.cush").write_text('run "a\x01\x1bb\ufffe.cush"\n')
    xml = tmp_path / "grade.xml"
    code, _, _ = grade("--backend", "sim", "--junit", str(xml), str(checks), str(tmp_path), tmp_path=tmp_path)
    assert code == ExitStatus.ERROR
    failure = ElementTree.parse(xml).getroot().find("testsuite/testcase/failure")
    assert "a\\x01\\x1bb\\ufffe.cush" in failure.get("message") and "a\\x01" in failure.text


def test_a_junit_file_that_cannot_be_written_is_refused_before_any_grading(tmp_path, monkeypatch):
    import cudashell.frontends.grade as G

    monkeypatch.setattr(G, "run_section", lambda *a, **k: pytest.fail("graded before the --junit path was checked"))
    code, out, err = grade("--backend", "sim", "--junit", str(tmp_path / "no" / "g.xml"), CHECKS, SUBMISSIONS[0],
                           tmp_path=tmp_path)
    assert (code, out) == (ExitStatus.USAGE, "")
    assert err.strip() == (f"IO_ERROR: cannot write --junit {tmp_path / 'no' / 'g.xml'}: its folder does not exist "
                           "— hint: name a file in a folder that exists and that you may write"), err


def test_a_profile_that_is_not_a_json_object_is_bad_profile_with_a_hint(tmp_path):
    listed = tmp_path / "l.json"
    listed.write_text("[1, 2]")
    code, _, err = grade("--backend", "sim", "--sim-profile", str(listed), CHECKS, SUBMISSIONS[0], tmp_path=tmp_path)
    assert code == ExitStatus.USAGE and "Traceback" not in err
    assert err.strip() == (f"BAD_PROFILE: {listed}: a profile is a JSON object of settings, not a list — hint: "
                           "`calibrate out FILE` writes one; built-in profiles: h100, " + ", ".join(BUILTIN)), err
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO())
    try:
        shell.execute("bench memcpy h2d pinned sizes 4KB reps 2")
        for ref in (str(listed), "/etc/passwd"):
            assert shell.execute(f"compare ref {ref}") is False
            assert shell.last_error.code == "BAD_PROFILE", shell.last_error
            assert "h100, h200" in shell.last_error.hint and "calibrate out" in shell.last_error.hint
    finally:
        shell.close()


def test_command_line_and_checks_file_errors_have_a_hint_and_their_place(tmp_path):
    code, _, err = grade("--backend", "sim", "--pass", "200%", CHECKS, SUBMISSIONS[0], tmp_path=tmp_path)
    assert (code, err.strip()) == (ExitStatus.USAGE, "USAGE: --pass 200% is outside 0..100 points — hint: --pass "
                                   "takes N% of the total (0% to 100%) or a number of points up to 100")
    code, _, err = grade("--backend", "sim", "--time-limit", "0", CHECKS, SUBMISSIONS[0], tmp_path=tmp_path)
    assert (code, err.strip()) == (ExitStatus.USAGE, "USAGE: --time-limit takes a number of seconds above 0 — hint: "
                                   f"how long one check may take, such as {DEFAULT_TIME_LIMIT:g} (the default)")
    bad = tmp_path / "cb.cush"
    bad.write_text('expect ok points 1\nsection "a" points 1\n')
    code, _, err = grade("--backend", "sim", str(bad), str(tmp_path), tmp_path=tmp_path)
    assert code == ExitStatus.USAGE and err.startswith(f"{bad}:1:18: USAGE: points before the first section"), err


# ------------------------------------------------------------------ a class: --jobs, --shard
def _without_times(tree: ElementTree.ElementTree) -> bytes:
    for e in tree.iter():
        e.attrib.pop("time", None)
    return ElementTree.tostring(tree.getroot())


def test_two_jobs_grade_as_one_does_in_the_same_order_json_and_junit(tmp_path):
    runs = {}
    for jobs in ("1", "2"):
        xml = tmp_path / f"jobs{jobs}.xml"
        code, graded = grades("--backend", "sim", "--jobs", jobs, "--junit", str(xml), CHECKS, *SUBMISSIONS,
                              tmp_path=tmp_path)
        runs[jobs] = (code, [(g["submission"], g["score"], g["passed"], outcome(g)) for g in graded],
                      _without_times(ElementTree.parse(xml)))
    assert runs["1"] == runs["2"]
    assert [s for s, *_ in runs["2"][1]] == SUBMISSIONS


def test_shards_partition_the_class_sorted_by_path_each_in_the_order_given(tmp_path):
    checks = tmp_path / "checks.cush"
    checks.write_text('section "runs" points 1\nalloc pinned 4KB as p\nexpect ok\n')
    folders = []
    for name in ("e", "a", "d", "b", "c"):
        (tmp_path / name).mkdir()
        folders.append(str(tmp_path / name))
    shards = []
    for i in (1, 2, 3):
        code, graded = grades("--backend", "sim", "--shard", f"{i}/3", str(checks), *folders, tmp_path=tmp_path)
        assert code == ExitStatus.SUCCESS
        shards.append([Path(g["submission"]).name for g in graded])
    assert shards == [["a"], ["b", "c"], ["e", "d"]]  # sorted a | b c | d e, each slice in the order given
    assert sorted(name for names in shards for name in names) == ["a", "b", "c", "d", "e"]  # each once
    code, graded = grades("--backend", "sim", "--shard", "7/9", str(checks), *folders, tmp_path=tmp_path)
    assert code == ExitStatus.SUCCESS and graded == []  # more machines than submissions: this one grades none


def test_a_bad_shard_or_jobs_is_a_usage_error_before_any_grading(tmp_path):
    for argv, said in ((("--shard", "0/3"), "--shard takes I/N with 1 ≤ I ≤ N, not '0/3'"),
                       (("--shard", "4/3"), "not '4/3'"), (("--shard", "half"), "not 'half'"),
                       (("--jobs", "0"), "--jobs takes a number of processes, 1 or more, not 0")):
        code, out, err = grade("--backend", "sim", *argv, CHECKS, *SUBMISSIONS, tmp_path=tmp_path)
        assert code == ExitStatus.USAGE and "USAGE: " in err and said in err and out == "", argv


def test_the_guides_merge_of_shard_junit_files_holds_every_submission_once(tmp_path):
    import subprocess
    import sys

    shards = [str(tmp_path / f"grade-{i}.xml") for i in (1, 2)]
    for i, xml in enumerate(shards, 1):
        grade("--backend", "sim", "--shard", f"{i}/2", "--junit", xml, CHECKS, *SUBMISSIONS, tmp_path=tmp_path)
    merged = tmp_path / "grade.xml"
    subprocess.run([sys.executable, str(EXAMPLE / "merge_junit.py"), str(merged), *shards], check=True)
    suites = ElementTree.parse(merged).getroot().findall("testsuite")
    assert sorted(s.get("name") for s in suites) == sorted(SUBMISSIONS)


def _fault_and_typo(tmp_path: Path) -> Path:
    """A checks file whose first command faults a kernel (or, in `typo/`, names no buffer), then four checks."""
    (tmp_path / "checks.cush").write_text("section one\nrun main.cush\nexpect ok points 1\nls\nexpect ok points 1\n"
                                          "ls\nexpect ok points 1\nls\nexpect ok points 1\n")
    for who, script in (("fault", "kernel define oob <<< __global__ void oob(float *a, int n) { int i = blockIdx.x * "
                                  "blockDim.x + threadIdx.x; a[i] = i; } >>>\nalloc device 256B as a\n"
                                  "launch oob a 100 grid 1 block 128\nsync\n"),
                        ("typo", "show nosuchbuffer\n")):
        (tmp_path / who).mkdir()
        (tmp_path / who / "main.cush").write_text(script)
    return tmp_path / "checks.cush"


def test_a_fault_and_a_typo_before_expect_ok_fail_that_check_alike_and_the_error_shows_once(tmp_path):
    """Issue 37: a kernel fault followed by `expect ok` was "not reached" where `show nosuch` followed by
    `expect ok` failed the check — one rule now; the checks a fault leaves unreached say so in one short line."""
    checks = _fault_and_typo(tmp_path)
    _, (fault, typo) = grades(str(checks), str(tmp_path / "fault"), str(tmp_path / "typo"), "--backend", "sim",
                              tmp_path=tmp_path)
    assert [c["code"] for c in fault["sections"][0]["checks"]][:1] == ["EXPECT_FAILED"]
    assert [c["code"] for c in typo["sections"][0]["checks"]][:1] == ["EXPECT_FAILED"]
    assert {c["code"] for c in fault["sections"][0]["checks"][1:]} == {"CUDA_ERROR_ILLEGAL_ADDRESS"}
    out = io.StringIO()
    env = Environment(stdin=None, stdout=out, stderr=io.StringIO(), stdin_isatty=False, stdout_isatty=True,
                      terminal_size=(80, 24), config_dir=tmp_path / "config", state_dir=tmp_path / "state")
    main(["grade", str(checks), str(tmp_path / "fault"), "--backend", "sim"], env)
    text = out.getvalue()
    assert text.count("the context is") == 1 and text.count("(above)") == 3, text
