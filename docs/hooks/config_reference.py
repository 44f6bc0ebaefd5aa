"""The configuration reference, written from the schema when the site is built.

`boolcl/config/schema.py` is the one place that says which keys exist: its dataclasses give each
key's type and default, their docstrings describe each section, and the comments beside and above
each field describe the key. This file turns them into `configuration.md`, a page that exists only
in the built site, so the reference cannot say anything the code does not.

Used two ways:

- as an MkDocs hook (`hooks:` in mkdocs.yml): `on_files` adds the generated page to the build;
- as a script: `python docs/hooks/config_reference.py` prints the page (to read it without MkDocs).

`tests/test_docs.py` checks that the page has a row for every key of the schema.
"""
from __future__ import annotations

import ast
import dataclasses
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "boolcl" / "config" / "schema.py"
PAGE = "configuration.md"
LONG_LIST = 4  # a default list longer than this is shown by its first items and its length

INTRO = """\
# Configuration reference

Every subcommand and the training entry point read one configuration: the schema's defaults, then
a recipe (`recipe=NAME`, a file in `recipes/recipe/`), then `key=value` overrides in Hydra syntax.
An unknown key or recipe is refused before any work starts, with the keys or recipes that exist.

```bash
boolcl config recipe=not_plus_tiny train.lr=1e-4     # print the resolved configuration
boolcl recipes                                       # the recipes, one line each
```

This page is generated from `boolcl/config/schema.py` each time the documentation is built: the
types and defaults are the schema's own, and each description is the comment or docstring that
stands beside that field in the code. The defaults are the schema's; a recipe changes many of them
(`boolcl config recipe=NAME` shows the result). Checks beyond types (ranges, combinations that are
refused) live in `boolcl/config/validate.py`.
"""


# ----------------------------------------------------------------------------- reading the source

def _comments(source: str) -> tuple[dict[int, str], dict[int, str]]:
    """Comments by line: those after code on their line (inline) and those alone on theirs."""
    inline, alone = {}, {}
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        row, col = tok.start
        text = tok.string.lstrip("#").strip()
        (alone if not lines[row - 1][:col].strip() else inline)[row] = text
    return inline, alone


def field_notes(source: str) -> tuple[dict[str, str], dict[tuple[str, str], tuple[str, str]]]:
    """From the schema's source: each class's docstring, and for each (class, field) its annotation
    as written and its description (the comment lines right above it, then the comment beside it)."""
    tree = ast.parse(source)
    inline, alone = _comments(source)
    docs, notes = {}, {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs[node.name] = " ".join((ast.get_docstring(node) or "").split())
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            above, row = [], stmt.lineno - 1
            while row in alone:
                above.insert(0, alone[row])
                row -= 1
            beside = inline.get(stmt.end_lineno, "")
            text = " ".join(part for part in (" ".join(above), beside) if part)
            notes[(node.name, stmt.target.id)] = (ast.unparse(stmt.annotation), text)
    return docs, notes


# ----------------------------------------------------------------------------- the page

def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _show(value) -> str:
    if value == "???":  # omegaconf.MISSING: a recipe (or the command line) must set it
        return "required"
    if isinstance(value, list) and len(value) > LONG_LIST:
        head = ", ".join(repr(v) for v in value[:2])
        return f"`[{head}, …]` ({len(value)} items)"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def _cell(text: str) -> str:
    """Table-safe: pipes escaped; outside code spans, `<name>` kept as text rather than read as HTML."""
    spans = text.replace("|", "\\|").split("`")
    return "`".join(s if i % 2 else s.replace("<", "&lt;").replace(">", "&gt;") for i, s in enumerate(spans)) or "—"


def anchor(section: str) -> str:
    """The heading id of a section: `train.decomposition` -> `train-decomposition`; the top level -> `top-level`."""
    return section.replace(".", "-").replace("_", "-") if section else "top-level"


def sections(root, notes: dict, prefix: str = ""):
    """(section name, dataclass, rows) for `root` and every dataclass under it, depth first;
    a row is (dotted key, type, default, description)."""
    rows, nested = [], []
    for f in dataclasses.fields(root):
        key = prefix + f.name
        value = _default(f)
        if dataclasses.is_dataclass(value):
            nested.append((key, type(value)))
            continue
        annotation, text = notes.get((root.__name__, f.name), (str(f.type), ""))
        rows.append((key, annotation, _show(value), text))
    yield prefix.rstrip("."), root, rows
    for key, cls in nested:
        yield from sections(cls, notes, key + ".")


def render(root=None, source: str | None = None) -> str:
    """The whole page, for the schema's `BoolclConfig` (or another dataclass tree and its source)."""
    if root is None:
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        from boolcl.config.schema import BoolclConfig

        root = BoolclConfig
    source = SCHEMA.read_text(encoding="utf-8") if source is None else source
    docs, notes = field_notes(source)
    parts, index = [INTRO], []
    body = []
    for name, cls, rows in sections(root, notes):
        if not rows:
            continue
        title = f"`{name}`" if name else "Top level"
        index.append(f"[{name or 'top level'}](#{anchor(name)})")
        body += [f"## {title} {{#{anchor(name)}}}", ""]
        if docs.get(cls.__name__):
            body += [docs[cls.__name__], ""]
        body += ["| key | type | default | description |", "| --- | --- | --- | --- |"]
        body += [f"| `{key}` | `{_cell(kind)}` | {_cell(default)} | {_cell(text)} |" for key, kind, default, text in rows]
        body.append("")
    parts += ["Sections: " + " · ".join(index) + ".", ""] + body
    return "\n".join(parts)


def keys(page: str) -> set[str]:
    """The keys a rendered page documents (the first cell of each table row)."""
    found = set()
    for line in page.splitlines():
        if line.startswith("| `"):
            found.add(line.split("`", 2)[1])
    return found


# ----------------------------------------------------------------------------- MkDocs

def on_files(files, config):
    """MkDocs hook: add the generated page (replacing a stale copy, should one be in docs/)."""
    from mkdocs.structure.files import File

    stale = files.get_file_from_path(PAGE)
    if stale is not None:
        files.remove(stale)
    files.append(File.generated(config, PAGE, content=render()))
    return files


if __name__ == "__main__":
    print(render())
