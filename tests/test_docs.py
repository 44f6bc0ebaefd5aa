"""The documentation: the configuration reference covers the schema, and README's links land.

The site itself is built by `.ci/run` (`mkdocs build --strict`, which fails on a broken link or
anchor inside docs/); README.md is not part of the site, so its links into docs/ are checked here.
"""
import dataclasses
import importlib.util
import re
import textwrap
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from boolcl.config.schema import BoolclConfig

ROOT = Path(__file__).resolve().parents[1]
HOOK = ROOT / "docs" / "hooks" / "config_reference.py"


@pytest.fixture(scope="module")
def reference():
    spec = importlib.util.spec_from_file_location("config_reference", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def schema_keys(node, prefix=""):
    """Every leaf key of the composed schema, walked by omegaconf rather than by the generator."""
    keys = set()
    for key in node.keys():
        value = OmegaConf.select(node, str(key), throw_on_missing=False)
        if OmegaConf.is_dict(value):
            keys |= schema_keys(value, f"{prefix}{key}.")
        else:
            keys.add(f"{prefix}{key}")
    return keys


def test_reference_has_a_row_for_every_schema_key(reference):
    page = reference.render()
    want = schema_keys(OmegaConf.structured(BoolclConfig))
    got = reference.keys(page)
    assert want - got == set(), f"keys of the schema the reference leaves out: {sorted(want - got)}"
    assert got - want == set(), f"rows for keys the schema does not have: {sorted(got - want)}"
    assert len(want) > 100  # the walk found the nested sections, not just the top level


def test_reference_reads_descriptions_types_and_defaults_from_the_source(reference):
    """A new field is documented by what stands beside it in the code: the comment above and on
    its line, the section's docstring, its annotation and its default."""
    source = textwrap.dedent('''
        from dataclasses import dataclass, field

        @dataclass
        class Inner:
            """What the inner section is for."""
            # how many widgets
            # (above the field, two lines)
            widgets: int = 3  # and beside it
            names: list[str] = field(default_factory=lambda: ["a", "b", "c", "d", "e", "f"])
            pipe: str = "x"  # a | b, and `<code>` stays code while <name> is text

        @dataclass
        class Outer:
            plain: bool = False
            inner: Inner = field(default_factory=Inner)
    ''')
    namespace = {}
    exec(compile(source, "schema_under_test", "exec"), namespace)  # noqa: S102 - a fixed string
    page = reference.render(namespace["Outer"], source)
    assert reference.keys(page) == {"plain", "inner.widgets", "inner.names", "inner.pipe"}
    row = next(line for line in page.splitlines() if line.startswith("| `inner.widgets`"))
    assert row == "| `inner.widgets` | `int` | `3` | how many widgets (above the field, two lines) and beside it |"
    assert "What the inner section is for." in page and "{#inner}" in page
    assert "(6 items)" in page and "| `plain` | `bool` | `false` | — |" in page
    assert r"a \| b, and `<code>` stays code while &lt;name&gt; is text" in page


def test_every_section_of_the_reference_has_its_anchor(reference):
    page = reference.render()
    ids = set(re.findall(r"\{#([a-z-]+)\}", page))
    linked = set(re.findall(r"\]\(#([a-z-]+)\)", page))
    assert linked and linked <= ids
    assert {"train-decomposition", "train-lora", "top-level"} <= ids  # nested sections have theirs too


def slug(heading: str) -> str:
    """MkDocs' (Python-Markdown toc's) default heading id."""
    text = re.sub(r"\{#([^}]+)\}\s*$", "", heading).strip()
    text = re.sub(r"[`*]", "", text)
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            explicit = re.search(r"\{#([^}]+)\}\s*$", line)
            found.add(explicit.group(1) if explicit else slug(line.lstrip("#")))
    return found


def test_readme_links_into_docs_land():
    """Each relative link of README.md names a file that exists and, with #anchor, a heading in it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert any(link.startswith("docs/") for link in local)
    broken = []
    for link in local:
        target, _, anchor = link.partition("#")
        path = ROOT / target if target else ROOT / "README.md"
        if not path.exists():
            broken.append(link)
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(link)
    assert not broken, f"README links that do not land: {broken}"


def test_ci_runs_the_readme_test_command_and_points_at_a_readme_section():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    section = re.search(r'# README, "([^"]+)":\n(.+)\n', ci)
    assert section, "the CI script no longer names the README section of its test command"
    name, command = section.groups()
    assert slug(name) in anchors(ROOT / "README.md"), f"README has no section {name!r}"
    assert f"```bash\n{command}\n```" in readme.split(f"## {name}", 1)[-1]
    assert len(readme.splitlines()) <= 320


PROJECT_TALK = re.compile(r"\b(sessions?|issues?|items?) [0-9]+|before the fix|no GPU (has|was) been lent", re.I)


@pytest.mark.parametrize("name", ["README.md", "mkdocs.yml", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*") if p.suffix in (".md", ".py"))])
def test_documentation_speaks_about_the_product(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    hits = [m.group(0) for m in PROJECT_TALK.finditer(text)]
    assert not hits, f"{name} talks about how boolcl was built, not about boolcl: {hits}"


def test_generated_reference_speaks_about_the_product(reference):
    hits = [m.group(0) for m in PROJECT_TALK.finditer(reference.render())]
    assert not hits, f"schema comments that reach the configuration reference: {hits}"


def test_schema_fields_are_all_dataclass_fields():
    """The generator walks dataclasses.fields; a section held in a plain attribute would be missed."""
    def walk(cls):
        for f in dataclasses.fields(cls):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if dataclasses.is_dataclass(default):
                walk(type(default))
    walk(BoolclConfig)


SECTIONS = ("train", "eval", "generate", "llm", "compare", "decompose", "interpolate", "demo")
OVERRIDE = re.compile(r"(?:^|[\s,=])((?:%s)\.[a-z_0-9.]+)=" % "|".join(SECTIONS))


def command_overrides(text: str) -> set[str]:
    """The dotted keys that commands in a markdown text's fenced blocks set (`train.lr=3e-4`, also
    inside `--variant NAME=key=value,key=value`)."""
    keys, fenced = set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            keys |= set(OVERRIDE.findall(line))
    return keys


def test_every_override_in_the_docs_commands_is_a_config_key():
    """A command the docs give must run: a key the schema no longer has would stop it with an error."""
    known = schema_keys(OmegaConf.structured(BoolclConfig))
    seen, unknown = set(), []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        keys = command_overrides(path.read_text(encoding="utf-8"))
        seen |= keys
        unknown += [f"{path.name}: {k}" for k in sorted(keys) if k not in known]
    assert "train.decomposition.weight" in seen and "train.named.topics" in seen  # the scan finds them
    assert not unknown, f"commands in the docs set keys the configuration does not have: {unknown}"
