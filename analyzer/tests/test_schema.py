"""The tables are declared once (mpiscope/archive/tables.spec): the native library, the
DataFrames and docs/data-model.md all follow it, and a library built from another
declaration is refused at load with one line telling to rebuild."""

from __future__ import annotations

import ctypes as C
import ctypes.util
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from mpiscope.archive import native, reader
from mpiscope.archive.schema import SCHEMA, SPEC, SpecError, parse
from mpiscope.archive.trace import Trace
from mpiscope.errors import UserError
from mpiscope.paths import BUILD_DIR

REPO = Path(__file__).resolve().parents[2]
SCHEMAGEN = REPO / "analyzer" / "native" / "schemagen.py"


def _schemagen(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCHEMAGEN), *args], capture_output=True,
                          text=True, cwd=REPO)


def test_the_docs_column_tables_are_current() -> None:
    done = _schemagen("docs", "docs/data-model.md", "--check")
    assert done.returncode == 0, done.stderr


def test_a_stale_docs_table_is_reported_and_regenerated(tmp_path: Path) -> None:
    doc = tmp_path / "model.md"
    text = (REPO / "docs" / "data-model.md").read_text(encoding="utf-8")
    doc.write_text(text.replace("| `truncated` | bool |", "| `truncated` | int8 |"),
                   encoding="utf-8")
    done = _schemagen("docs", str(doc), "--check")
    assert done.returncode == 1 and "stale" in done.stderr
    assert _schemagen("docs", str(doc)).returncode == 0
    assert doc.read_text(encoding="utf-8") == text


def test_the_built_header_is_current(tmp_path: Path) -> None:
    built = BUILD_DIR / "native" / "generated" / "schema.h"
    if not built.is_file():
        pytest.skip(f"{built} not there (an installed reader): the layout test covers it")
    assert _schemagen("header", str(tmp_path / "schema.h")).returncode == 0
    assert built.read_text() == (tmp_path / "schema.h").read_text(), "run `make build`"


def test_the_library_exports_the_declared_layout() -> None:
    lib = native.library()
    assert lib.mpsr_layout().decode() == SCHEMA.layout()


def _altered(old: str, new: str):
    text = SPEC.read_text(encoding="utf-8")
    assert old in text
    return parse(text.replace(old, new))


@pytest.mark.parametrize(("old", "new", "what"), [
    ("  coll_op      int16     int16_t", "  coll_op      int32     int32_t", "table calls"),
    ("  isend            MpiIsend\n", "", "enum p2p_event"),
    ("  nloc             int32_t", "  nloc             int64_t", "struct mpsr_config"),
])
def test_a_library_of_another_layout_is_refused(monkeypatch, old: str, new: str,
                                                 what: str) -> None:
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "SCHEMA", _altered(old, new))
    with pytest.raises(UserError) as err:
        native.library()
    assert err.value.subject.endswith("libmpiscope_reader.so")
    assert err.value.problem == (f"native reader is out of date (its {what} differs from "
                                 "tables.spec): run `make build`")
    assert "\n" not in err.value.one_line()


def test_a_library_without_a_layout_is_refused() -> None:
    libc = C.CDLL(ctypes.util.find_library("c"))
    with pytest.raises(UserError, match=r"it predates tables.spec\): run `make build`"):
        native.check_layout(libc, Path("old.so"), SCHEMA)


def _dtype_ok(series: pd.Series, dtype: str) -> bool:
    if dtype == "str":  # object before pandas 3, its string dtype since
        return pd.api.types.is_string_dtype(series.dtype)
    return str(series.dtype) == dtype


@pytest.mark.parametrize("use_cache", [False, True])
@pytest.mark.parametrize("fixture", ["two_rank_trace", "scorep_trace"])
def test_every_table_has_the_declared_columns_and_dtypes(request, fixture: str,
                                                         use_cache: bool) -> None:
    trace = reader.load(request.getfixturevalue(fixture), use_cache=use_cache)
    fields = [f.name for f in dataclasses.fields(Trace)]
    assert fields == ["path", "meta", *SCHEMA.tables]
    for table in SCHEMA.tables.values():
        df = getattr(trace, table.name)
        assert list(df.columns) == table.names, table.name
        for col in table.columns:
            assert _dtype_ok(df[col.name], col.dtype), (table.name, col.name, df[col.name].dtype)
            if col.enum:
                assert list(df[col.name].cat.categories) == SCHEMA.enums[col.enum].names


@pytest.mark.parametrize(("line", "problem"), [
    ("  x  int33  -", "unknown dtype 'int33'"),
    ("  x  int32  int64_t", "a int32 column cannot be filled as int64_t"),
    ("  x  bool  int32_t", "a bool column cannot be filled as int32_t"),
    ("  x  int32  long", "unknown C type 'long'"),
    ('  x  int32  -  "', "joins a column of the same dtype"),
    ("  x  category(nope)  int32_t", "no enum nope"),
])
def test_a_malformed_declaration_names_its_line(line: str, problem: str) -> None:
    with pytest.raises(SpecError, match=re.escape(problem)) as err:
        parse(f"# a table\ntable t T: doc\n{line}\n", "spec")
    assert str(err.value).startswith("spec:")
