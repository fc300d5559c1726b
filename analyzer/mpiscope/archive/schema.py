"""A trace's tables, declared once in tables.spec (its header says the format), parsed.

The Python side takes the order and dtypes of every DataFrame's columns from here, the
ctypes binding the native columns and the config struct. This module needs the standard
library only and imports nothing of mpiscope: analyzer/native/schemagen.py loads it by
path at build time and writes the C layout and the docs' tables from the same parse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SPEC = Path(__file__).with_name("tables.spec")
DITTO = '"'  # a column's doc: documented with the column above

# C element type -> numpy dtype of its buffer
C_NUMPY = {"int8_t": "int8", "uint8_t": "uint8", "int16_t": "int16", "int32_t": "int32",
           "uint32_t": "uint32", "int64_t": "int64", "uint64_t": "uint64"}
# pandas dtypes a column may declare
DTYPES = {*C_NUMPY.values(), "bool", "category", "str", "object"}

_HEAD = re.compile(r"^(?P<what>table|enum|struct)\s+(?P<name>\w+)(?P<rest>[^:]*):\s*(?P<doc>.*)$")
_CATEGORY = re.compile(r"^category\((?P<enum>\w+)\)$")


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # pandas dtype: "int32", …, "bool", "category", "str", "object"
    ctype: str | None  # C element type the native reader fills; None: Python makes it
    doc: str = ""
    enum: str | None = None  # category(ENUM): the enum whose values it holds
    joined: bool = False  # documented with the column above (one row in the docs)

    @property
    def storage(self) -> str:
        """numpy dtype of the native reader's buffer (codes for a category)."""
        return "bool" if self.dtype == "bool" else C_NUMPY[self.ctype or ""]


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]
    prefix: str | None = None  # C enum prefix: the native reader builds the table
    like: str | None = None  # the table whose columns it shares

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def native(self) -> tuple[Column, ...]:
        """The columns the native reader fills, in its order."""
        return tuple(c for c in self.columns if c.ctype)


@dataclass(frozen=True)
class Value:
    name: str
    doc: str = ""


@dataclass(frozen=True)
class Enum:
    name: str
    doc: str
    values: tuple[Value, ...]
    prefix: str | None = None  # C enum prefix: the C side uses the codes

    @property
    def names(self) -> list[str]:
        return [v.name for v in self.values]


@dataclass(frozen=True)
class Field:
    name: str
    ctype: str  # "T" or "T[]" (an array Python owns)
    doc: str = ""

    @property
    def element(self) -> str:
        return self.ctype.removesuffix("[]")

    @property
    def array(self) -> bool:
        return self.ctype.endswith("[]")


@dataclass(frozen=True)
class Struct:
    name: str
    cname: str
    doc: str
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Schema:
    tables: dict[str, Table]
    enums: dict[str, Enum]
    structs: dict[str, Struct]

    @property
    def native_tables(self) -> list[Table]:
        """The tables the native reader builds, in the order of its table index."""
        return [t for t in self.tables.values() if t.prefix]

    def layout(self) -> str:
        """What the native library and Python must agree on (no docs): the library exports
        the text it was built from as mpsr_layout(), the binding compares."""
        lines = [f"table {t.name}: " + ", ".join(f"{c.name} {c.ctype}" for c in t.native)
                 for t in self.native_tables]
        lines += [f"enum {e.name}: " + " ".join(e.names) for e in self.enums.values()
                  if e.prefix]
        lines += [f"struct {s.cname}: " + ", ".join(f"{f.name} {f.ctype}" for f in s.fields)
                  for s in self.structs.values()]
        return "".join(f"{line}\n" for line in lines)


class SpecError(ValueError):
    """A malformed line of tables.spec (`file:line: problem`)."""


def _column(words: list[str], above: Column | None, where: str) -> Column:
    if len(words) < 3:
        raise SpecError(f"{where}: a column needs NAME DTYPE CTYPE [DOC]")
    name, dtype, ctype = words[:3]
    doc = words[3] if len(words) > 3 else ""
    m = _CATEGORY.match(dtype)
    enum = m["enum"] if m else None
    dtype = "category" if m else dtype
    if dtype not in DTYPES:
        raise SpecError(f"{where}: unknown dtype {dtype!r}")
    if ctype != "-":
        if ctype not in C_NUMPY:
            raise SpecError(f"{where}: unknown C type {ctype!r}")
        # the buffer is wrapped as it is: a numeric column must be the C type itself
        fits = {"bool": ctype == "uint8_t", "category": "int" in ctype}.get(
            dtype, C_NUMPY[ctype] == dtype)
        if not fits:
            raise SpecError(f"{where}: a {dtype} column cannot be filled as {ctype}")
    joined = doc == DITTO
    if joined and (above is None or above.dtype != dtype):
        raise SpecError(f"{where}: {DITTO} joins a column of the same dtype")
    return Column(name, dtype, None if ctype == "-" else ctype,
                  above.doc if joined and above else doc, enum, joined)


def parse(text: str, origin: str = "tables.spec") -> Schema:
    """The declaration in `text`; SpecError names the first malformed line."""
    blocks: list[tuple[re.Match, list[tuple[str, list[str]]]]] = []
    for n, line in enumerate(text.splitlines(), 1):
        where = f"{origin}:{n}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0].isspace():
            if not blocks:
                raise SpecError(f"{where}: an indented line outside a declaration")
            blocks[-1][1].append((where, line.split(None, 3)))
            continue
        head = _HEAD.match(line)
        if not head:
            raise SpecError(f"{where}: expected `table|enum|struct NAME …: DOC`")
        blocks.append((head, []))

    tables: dict[str, Table] = {}
    enums: dict[str, Enum] = {}
    structs: dict[str, Struct] = {}
    for head, lines in blocks:
        what, name, doc, rest = head["what"], head["name"], head["doc"], head["rest"].split()
        if name in tables or name in enums or name in structs:
            raise SpecError(f"{origin}: {name} declared twice")
        if what == "table":
            tables[name] = _table(name, doc, rest, lines, tables, origin)
        elif what == "enum":
            enums[name] = _enum(name, doc, rest, lines, origin)
        else:
            structs[name] = _struct(name, doc, rest, lines, origin)
    for t in tables.values():
        for c in t.columns:
            if c.enum and c.enum not in enums:
                raise SpecError(f"{origin}: {t.name}.{c.name}: no enum {c.enum}")
    return Schema(tables, enums, structs)


def _table(name: str, doc: str, rest: list[str], lines: list[tuple[str, list[str]]],
           tables: dict[str, Table], origin: str) -> Table:
    if rest[:1] == ["like"]:  # OTHER's columns and C layout
        if len(rest) != 2 or rest[1] not in tables or lines:
            raise SpecError(f"{origin}: table {name}: `like` names one table above and "
                            "declares no columns of its own")
        base = tables[rest[1]]
        return Table(name, doc, base.columns, base.prefix, base.name)
    if len(rest) > 1:
        raise SpecError(f"{origin}: table {name}: expected `table NAME [PREFIX]: DOC`")
    columns: list[Column] = []
    for where, words in lines:
        columns.append(_column(words, columns[-1] if columns else None, where))
    if len({c.name for c in columns}) != len(columns):
        raise SpecError(f"{origin}: table {name}: a column declared twice")
    prefix = rest[0] if rest else None
    if prefix and not any(c.ctype for c in columns):
        raise SpecError(f"{origin}: table {name}: a C prefix but no column with a C type")
    return Table(name, doc, tuple(columns), prefix)


def _enum(name: str, doc: str, rest: list[str], lines: list[tuple[str, list[str]]],
          origin: str) -> Enum:
    if len(rest) > 1:
        raise SpecError(f"{origin}: enum {name}: expected `enum NAME [PREFIX]: DOC`")
    values = tuple(Value(w[0], " ".join(w[1:])) for _, w in lines)
    return Enum(name, doc, values, rest[0] if rest else None)


def _struct(name: str, doc: str, rest: list[str], lines: list[tuple[str, list[str]]],
            origin: str) -> Struct:
    if len(rest) != 1:
        raise SpecError(f"{origin}: struct {name}: expected `struct NAME CNAME: DOC`")
    fields = []
    for where, w in lines:
        if len(w) < 2 or w[1].removesuffix("[]") not in C_NUMPY:
            raise SpecError(f"{where}: a field needs NAME CTYPE [DOC] (C types: "
                            f"{', '.join(C_NUMPY)}, T[] for an array)")
        fields.append(Field(w[0], w[1], " ".join(w[2:])))
    return Struct(name, rest[0], doc, tuple(fields))


def load(path: Path = SPEC) -> Schema:
    return parse(path.read_text(encoding="utf-8"), str(path))


SCHEMA = load()
