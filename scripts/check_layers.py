#!/usr/bin/env python3
"""Check that imports between mpiscope's sub-packages run one way, and never in a circle.

    python3 scripts/check_layers.py [REPO]     # `make lint` and `make test` run it

Layers, bottom to top (a module may import its own layer's sub-package and any lower one):

    base      mpiscope.errors, mpiscope.paths, mpiscope.output, mpiscope.numbers
    archive   mpiscope.archive      reading traces
    analysis  mpiscope.analysis     what the traces mean
    engines   mpiscope.engines      where analyses run: pandas here, or a Dask cluster
    render    mpiscope.render       terminal, HTML, Markdown, palette
    webui     mpiscope_webui        the Dash app      (may import render: the palette)
    jobs      mpiscope.jobs         launching traced jobs (neither render nor webui)
    cli       mpiscope.cli, mpiscope.__main__

render, webui and jobs share a level; of the imports between them only webui -> render is
allowed. `mpiscope/__init__.py` is the notebook façade: it may import base, archive and
analysis; nothing in the packages imports it, except its `__version__`.

Every import counts, also those inside functions (lazy imports still tie the modules
together). Exit 1 with one line per violation, `file:line: rule: detail`: an import against
the layers, an import cycle between modules (of different sub-packages, or within one), a
module in no layer.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

PACKAGES = {"mpiscope": Path("analyzer/mpiscope"), "mpiscope_webui": Path("webui/mpiscope_webui")}
FACADE = "mpiscope"
BASE = {"mpiscope.errors", "mpiscope.paths", "mpiscope.output", "mpiscope.numbers"}
# mpiscope.X is in layer X
SUBPACKAGES = {"archive", "analysis", "engines", "render", "jobs", "cli"}
LEVEL = {"base": 0, "archive": 1, "analysis": 2, "engines": 2.5, "render": 3, "webui": 3,
         "jobs": 3, "cli": 4}
SIDEWAYS = {("webui", "render")}  # same-level imports allowed (importer, imported)
# the notebook façade sits on top of the library, beside the CLI: it reads, analyzes and
# prints the same one-line notices (render.cutshort), but never launches jobs or serves
FACADE_MAY_IMPORT = {"base", "archive", "analysis", "engines", "render"}
FACADE_NAMES_ALLOWED = {"__version__"}  # a constant, defined without imports


@dataclass(frozen=True)
class Import:
    importer: str  # module name
    imported: str  # module name inside PACKAGES
    path: Path  # of the importer, relative to the repository
    line: int
    facade_names: frozenset[str] = frozenset()  # `from mpiscope import X`: X not a module

    @property
    def reads_version_only(self) -> bool:
        """`from mpiscope import __version__`: a constant, no tie to what the façade imports."""
        return self.imported == FACADE and bool(self.facade_names) and \
            self.facade_names <= FACADE_NAMES_ALLOWED


@dataclass(frozen=True)
class Violation:
    path: Path
    line: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.detail}"


def layer(module: str) -> str | None:
    """The layer a module of PACKAGES sits in; "facade" for mpiscope itself, None if none."""
    if module == FACADE:
        return "facade"
    if module in BASE:
        return "base"
    if module == "mpiscope.__main__":
        return "cli"
    top, _, rest = module.partition(".")
    if top == "mpiscope_webui":
        return "webui"
    sub = rest.split(".")[0]
    return sub if sub in SUBPACKAGES else None


def modules(repo: Path) -> dict[str, Path]:
    """Module name -> file (relative to repo), for every .py file of PACKAGES."""
    out = {}
    for package, where in PACKAGES.items():
        for file in sorted((repo / where).rglob("*.py")):
            parts = file.relative_to(repo / where).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package, *parts))] = file.relative_to(repo)
    return out


def imports(name: str, path: Path, source: str, known: set[str]) -> Iterator[Import]:
    """Every import of a module of `known` in one file, wherever it sits in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _known_prefix(alias.name, known)
                if target:
                    yield Import(name, target, path, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importer's package upwards
                anchor = package.rsplit(".", node.level - 1)[0]
                base = f"{anchor}.{node.module}" if node.module else anchor
            target = _known_prefix(base, known)
            if not target:
                continue
            plain = set()  # names that are attributes of `target`, not its submodules
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    yield Import(name, sub, path, node.lineno)
                else:
                    plain.add(alias.name)
            if plain:
                yield Import(name, target, path, node.lineno,
                             frozenset(plain) if target == FACADE else frozenset())


def _known_prefix(dotted: str, known: set[str]) -> str | None:
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return None


def layer_violation(imp: Import) -> str | None:
    """Why this import breaks the layers, or None."""
    src, dst = layer(imp.importer), layer(imp.imported)
    if dst == "facade":
        if src == "facade" or imp.reads_version_only:
            return None
        return ("the façade is for notebooks: import from the sub-package "
                f"({imp.importer} imports {imp.imported}"
                + (f" {', '.join(sorted(imp.facade_names))})" if imp.facade_names else ")"))
    if src == "facade":
        return None if dst in FACADE_MAY_IMPORT else (
            f"the façade may import only {', '.join(sorted(FACADE_MAY_IMPORT))} "
            f"({imp.imported} is {dst})")
    if src == dst or src is None or dst is None:
        return None
    if LEVEL[dst] > LEVEL[src]:
        return f"upward import: {src} -> {dst} ({imp.importer} imports {imp.imported})"
    if LEVEL[dst] == LEVEL[src] and (src, dst) not in SIDEWAYS:
        return (f"sideways import: {src} -> {dst} ({imp.importer} imports {imp.imported}); "
                f"allowed at one level: {', '.join(f'{a} -> {b}' for a, b in SIDEWAYS)}")
    return None


def cycles(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """One shortest cycle per strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan; the module graph is small, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [_shortest_cycle(comp[0], set(comp), edges) for comp in sorted(components)]


def _shortest_cycle(start: str, within: set[str], edges: dict[str, dict[str, Import]]
                    ) -> list[str]:
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, {})):
                if w == start:
                    return paths[v] + [start]
                if w in within and w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{start} is in a component but on no cycle")


def check(repo: Path) -> list[Violation]:
    found = modules(repo)
    known = set(found)
    out: list[Violation] = []
    edges: dict[str, dict[str, Import]] = {}
    for name, path in found.items():
        if layer(name) is None:
            out.append(Violation(path, 1, "module in no layer",
                                 f"{name}: give it a layer in scripts/check_layers.py"))
        for imp in imports(name, path, (repo / path).read_text(), known):
            why = layer_violation(imp)
            if why:
                out.append(Violation(path, imp.line, "layers", why))
            seen = edges.setdefault(name, {}).get(imp.imported)
            if imp.imported != name and not imp.reads_version_only and (
                    not seen or imp.line < seen.line):
                edges[name][imp.imported] = imp
    for cycle in cycles(edges):
        first = edges[cycle[0]][cycle[1]]
        subs = sorted({layer(m) or m for m in cycle[:-1]})
        where = (f"between sub-packages {', '.join(subs)}" if len(subs) > 1
                 else f"within {subs[0]}")
        steps = " -> ".join(
            f"{a} ({edges[a][b].path.name}:{edges[a][b].line})" for a, b in pairwise(cycle))
        out.append(Violation(first.path, first.line, f"import cycle {where}",
                             f"{steps} -> {cycle[-1]}"))
    return sorted(out, key=lambda v: (str(v.path), v.line, v.rule))


def main(argv: list[str]) -> int:
    repo = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    violations = check(repo)
    for v in violations:
        print(v)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
