"""Issue 37's smaller defects, each as a student meets it at the prompt: what the screen says (text at 80 columns),
the JSON where a key carries it."""

from __future__ import annotations

from .conftest import text_run

OOB = ("kernel define oob <<< __global__ void oob(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; "
       "a[i] = i; } >>>")
INC = ("kernel define inc <<< __global__ void inc(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; "
       "if (i < n) a[i] += 1; } >>>")


def test_show_access_lists_64_elements_then_says_how_many_more():
    text = text_run([INC, "alloc device 4KB as a", "launch inc a 100 grid 1 block 128 show-access"])
    assert "a[63] " in text and "a[64]" not in text
    assert "… 36 more elements of a touched" in text


def test_show_access_draws_a_faulting_kernel_and_its_launch_line_says_it_faults_on_the_simulator():
    text = text_run([OOB, "alloc device 256B as a", "launch oob a 100 grid 1 block 128 show-access", "sync"])
    launch = next(line for line in text.splitlines() if line.startswith("launch oob"))
    assert "only the simulator counts" not in text
    assert "the kernel faults" in " ".join(text.split())
    assert "a[63] " in text and "written by" in text  # the 64 threads in bounds, drawn
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in text and launch


def test_a_typo_in_a_flag_or_keyword_gets_did_you_mean():
    """`memcpy p d asynk` once said "bad size 'asynk'", `launch increment p strem 1` "takes 1 arguments, got 3",
    `alloc pinned 1MB mappd` gave no suggestion: the grammar knows each command's keywords."""
    shown = " ".join(text_run(["alloc pinned 1MB as p; alloc device 1MB as d", "memcpy p d asynk",
                               "launch increment d strem 1", "alloc pinned 1MB mappd"]).split())
    assert "unexpected 'asynk'" in shown and "did you mean `async`?" in shown and "bad size" not in shown
    assert "increment takes 1 argument, got 3" in shown and "did you mean `stream` for 'strem'?" in shown
    assert "unexpected 'mappd' — hint: did you mean `mapped`?" in shown


def test_a_value_that_is_not_an_int32_says_so_with_its_article():
    shown = text_run(["kernel define k2 <<< __global__ void k2(float *a, int n) { } >>>", "alloc device 1KB as d",
                      "launch k2 d 2.5", "launch k2 d x"])
    assert "2.5 is not an int32" in shown and "a number for an int32 parameter" in shown


def test_a_race_warning_of_the_previous_launch_comes_before_the_next_commands_error():
    text = text_run(["kernel define racy <<< __global__ void racy(float *a, int n) { __shared__ float s[64]; "
                     "s[threadIdx.x % 2] = threadIdx.x; a[threadIdx.x] = s[0]; } >>>", "alloc device 1KB as a",
                     "launch racy a 64 grid 1 block 64", "show nosuch"])
    assert -1 < text.index("warning: racecheck") < text.index("NO_SUCH_BUFFER")


def test_one_of_a_thing_is_singular():
    text = text_run(["kernel define one <<< __global__ void one(float *a, int n) { if (threadIdx.x == 0) a[0] = 1; } "
                     ">>>", "alloc device 4B as a", "launch one a 1 grid 1 block 32", "alloc pinned 1B as p",
                     "fill p 1", "hold", "launch increment a n 1", "release"])
    assert "1 request, 1 sector =" in text and "1 requests" not in text
    assert "p: 1 uint8 element ← 1" in text
    assert "1 operation was waiting" in text


def test_a_sync_after_a_loop_of_copies_folds_the_identical_finished_lines():
    text = text_run(["demo pinned-vs-pageable"])
    finished = [line for line in text.splitlines() if "finished: memcpy" in line]
    assert len(finished) <= 4 and any(line.endswith(" ×100") for line in finished), finished
    assert len(text.splitlines()) < 60


def test_help_of_a_word_that_is_not_a_command_says_which_commands_take_it():
    shown = " ".join(text_run(["help lang"]).split())
    assert "'lang' is not a command: it is a word of `demo`, `lesson`" in shown and "lang zh`" in shown
    assert "did you mean `launch`" not in shown


def test_a_script_that_needs_a_profile_says_which_instead_of_failing_an_expect():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "examples" / "streams-one-copy-engine.cush"
    r = subprocess.run([sys.executable, "-m", "cudashell", "--backend", "sim", str(script)], capture_output=True,
                       text=True, timeout=120)
    said = r.stdout + r.stderr
    assert r.returncode == 1 and "NEEDS_PROFILE" in said and "EXPECT_FAILED" not in said
    assert "--sim-profile one-copy-engine" in said
    ok = subprocess.run([sys.executable, "-m", "cudashell", "--backend", "sim", "--sim-profile", "one-copy-engine",
                         str(script)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
