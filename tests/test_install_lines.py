"""Every install line the project shows installs what it says (issue 37): cudashell is not on PyPI, so a line names it
as the README does — `.[EXTRAS]` from a checkout, or `"cudashell[EXTRAS] @ git+URL"` — with extras setup.cfg has,
and any other package it names is one setup.cfg depends on. Offline: installing from the network is not CI's."""

from __future__ import annotations

import ast
import configparser
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENT = re.compile(r"^(?P<name>\.|[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[(?P<extras>[a-z0-9_,]+)\])?"
                         r"(?:\s*@\s*(?P<url>git\+\S+)|(?P<version>[=<>!~].*))?$")


def setup_cfg() -> tuple[set[str], set[str]]:
    """(the extras setup.cfg declares, every package it depends on — always or through an extra), names normalised."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    extras = set(cfg["options.extras_require"])
    lines = cfg["options"]["install_requires"].split() + [
        word for key in extras for word in cfg["options.extras_require"][key].split()]
    names = {normal(re.split(r"[=<>!~\[]", word)[0]) for word in lines if word[0].isalpha()}
    return extras, names


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def texts() -> dict[str, str]:
    """What a user reads, by where: the README, the docs, the notebooks' cells, the lessons and demos, the examples,
    and the strings of the package's code (its messages)."""
    out = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*.cush")),
                 *sorted((ROOT / "cudashell" / "teaching").rglob("*.toml")),
                 *sorted((ROOT / "cudashell" / "teaching").rglob("*.cush"))]:
        out[str(path.relative_to(ROOT))] = path.read_text()
    for path in sorted((ROOT / "examples").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            out[f"{path.relative_to(ROOT)} cell {i}"] = "".join(cell["source"])
    for path in sorted((ROOT / "cudashell").rglob("*.py")):
        out[str(path.relative_to(ROOT))] = "\n".join(code_strings(path))
    return out


def code_strings(path: Path) -> list[str]:
    """The string literals of a module, an f-string whole with each of its values read as 13 (a version)."""
    tree = ast.parse(path.read_text())
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "13" for v in n.values))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in parts:
            out.append(n.value)
    return out


def install_lines(text: str) -> list[list[str]]:
    """The packages of each `pip install …` in the text, word by word (a quoted one whole) up to a `, ), ;, & or line
    end: the first word, then those that carry extras, a version or a URL (prose after the line is not a package)."""
    found = []
    for m in re.finditer(r"pip install ", text):
        i, packages = m.end(), []
        while True:
            while i < len(text) and text[i] == " ":
                i += 1
            if i >= len(text) or text[i] in "`);&\n":
                break
            if text[i] in "'\"":
                close = text.find(text[i], i + 1)
                word, i = text[i + 1:close], close + 1
            else:
                end = re.compile(r"[\s`);&]").search(text, i)
                stop = end.start() if end else len(text)
                word, i = text[i:stop] if text[i:stop] == "." else text[i:stop].rstrip(",.:"), stop
            if word.startswith("-"):
                continue
            if not REQUIREMENT.match(word) or (packages and not re.search(r"[\[=<>!~@]", word)):
                break
            packages.append(word)
        found.append(packages)
    return found


def problems(where: str, packages: list[str], readme_url: str, extras: set[str], depends: set[str]) -> list[str]:
    out = [] if packages else [f"{where}: `pip install` names nothing this test can read"]
    for word in packages:
        m = REQUIREMENT.match(word)
        name, wanted = m["name"], set((m["extras"] or "").split(",")) - {""}
        if wanted - extras:
            out.append(f"{where}: {word}: setup.cfg has no extra {sorted(wanted - extras)}")
        if name == "cudashell" and m["url"] != readme_url:
            out.append(f"{where}: {word}: cudashell is not on PyPI — `cudashell[…] @ {readme_url}` as the README")
        elif name not in (".", "cudashell") and normal(name) not in depends:
            out.append(f"{where}: {word}: not a package setup.cfg depends on")
    return out


def readme_url() -> str:
    """The URL the README installs cudashell from (its notebook section's line)."""
    lines = [p for text in [(ROOT / "README.md").read_text()] for ps in install_lines(text) for p in ps
             if p.startswith("cudashell[")]
    assert lines, "the README shows how to install cudashell from the repository"
    return REQUIREMENT.match(lines[0])["url"]


def test_every_install_line_names_the_package_as_the_readme_does():
    extras, depends = setup_cfg()
    url = readme_url()
    seen, wrong = 0, []
    for where, text in texts().items():
        for packages in install_lines(text):
            seen += 1
            wrong += problems(where, packages, url, extras, depends)
    assert seen >= 8 and not wrong, "\n".join(wrong)


def test_the_notebooks_first_cell_installs_from_the_repository_as_the_readme_says():
    cell = "".join(json.loads((ROOT / "examples" / "cudashell-tour.ipynb").read_text())["cells"][0]["source"])
    assert f'!pip install "cudashell[cuda,notebook] @ {readme_url()}"' in cell
    assert f'`!pip install "cudashell[cuda,notebook] @ {readme_url()}"`' in (ROOT / "README.md").read_text()


def test_the_checker_refuses_a_name_pypi_does_not_have_and_an_extra_setup_cfg_lacks():
    extras, depends = setup_cfg()
    [bare] = install_lines("then `!pip install \"cudashell[cuda,notebook]\"` in a cell")
    [unknown] = install_lines("(pip install '.[gpu]'): to plot")
    [other] = install_lines("pip install leftpad && run")
    assert len(problems("x", bare, "git+URL", extras, depends)) == 1
    assert len(problems("x", unknown, "git+URL", extras, depends)) == 1
    assert len(problems("x", other, "git+URL", extras, depends)) == 1
    [fine] = install_lines("`pip install '.[cuda]' 'cuda-bindings==13.*'` for a CUDA 13 driver")
    assert fine == [".[cuda]", "cuda-bindings==13.*"] and not problems("x", fine, "git+URL", extras, depends)
