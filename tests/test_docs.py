"""The reference in docs/ is the registry's; help comes from the same specs."""

from cudashell.docs import REFERENCE, reference_markdown
from cudashell.registry import specs


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


def test_the_readme_tour_is_a_real_run():
    from cudashell.docs import README, readme_with_tour

    text = README.read_text()
    assert readme_with_tour(text) == text, "run: python -m cudashell.docs --write"
    assert "cush> alloc pageable 64MB as pageable" in text
