"""An edit's answer as a unified diff in its examples' layout (state.diffs)."""

from __future__ import annotations

from mcp_sim.state.diffs import DiffTemplate, diff_template, hunks

LAYOUT = "Edited {path}:\n{hunks}\nDone."


def example(path: str, before: str, after: str, context: int = 3) -> tuple[dict[str, str], str]:
    return {"path": path}, LAYOUT.format(path=path, hunks=hunks(before, after, context))


def test_the_examples_layout_is_learned_and_filled_with_this_edits_hunks() -> None:
    template = diff_template([example("/a.txt", "x\ny\n", "x\nz\n")], "path")
    assert template is not None and template.field is None
    filled = template.fill("/b.txt", "one\ntwo\nthree\n", "one\n2\nthree\n")
    assert filled == "Edited /b.txt:\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\nDone."


def test_the_context_an_example_shows_is_kept() -> None:
    before = "\n".join(f"line {n}" for n in range(1, 21)) + "\n"
    after = before.replace("line 10\n", "line ten\n")
    template = diff_template([example("/a.txt", before, after, context=4)], "path")
    assert template is not None and template.context == 4
    assert template.fill("/a.txt", before, after).count("\n line ") == 8


def test_a_structured_answer_keeps_its_field_and_examples_that_disagree_teach_nothing() -> None:
    arguments, text = example("/a.txt", "x\n", "y\n")
    template = diff_template([(arguments, {"content": text})], "path")
    assert isinstance(template, DiffTemplate) and template.fill("/c", "p\n", "q\n") == {
        "content": "Edited /c:\n@@ -1 +1 @@\n-p\n+q\nDone."}
    other = ({"path": "/b.txt"}, "Changed /b.txt\n" + hunks("x\n", "y\n"))
    assert diff_template([example("/a.txt", "x\n", "y\n"), other], "path") is None
    assert diff_template([({"path": "/a"}, "Successfully edited /a")], "path") is None
