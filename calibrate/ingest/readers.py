"""Read import files record by record: JSONL, JSON (a list of objects) and CSV.

Every reader is a generator over `Record`s and holds one record at a time, so a file of any
length streams through in constant memory; each record carries the line it starts on. A
problem the reader itself can see (bytes that are not UTF-8, a line that is not JSON, a CSV
row with the wrong number of cells) comes out as a `Record` with `problem` set and no
`fields`, so the caller lists it beside its own validation problems. A problem after which
the rest of the file cannot be read (a JSON list broken in the middle, a bad CSV header)
is the last record of the stream.

CSV cells are text: the reader leaves them as strings and drops empty cells (an empty cell
is an absent field); turning "3" into 3 or '["a", "b"]' into a list is the validator's job,
because only it knows the field. The csv module is used rather than pandas because it reports
exact physical line numbers, quoted cells that span lines included.

JSON may nest at most `MAX_NESTING` levels (a record is level 1): deeper is the record's
problem, naming its field, never a RecursionError (`load_json`, `check_nesting` in calibrate/text/json_values.py;
the judges read LLM answers with the same function).
"""

from __future__ import annotations

import codecs
import csv
import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from calibrate.ingest.fields import kind_of
from calibrate.ingest.problems import ImportProblem, reject
from calibrate.text.json_values import MAX_NESTING, NestingTooDeep, check_nesting, deep_field, load_json

FORMATS = ("jsonl", "json", "csv")
EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv"}
EMPTY_FILE = "file is empty: no records"
CHUNK = 1 << 16

# The csv module refuses fields over 128 KiB by default; the importer applies its own limit
# (`max_field_chars`) with a message naming the field, so the csv module's must be higher.
_CSV_FIELD_LIMIT = 2**31 - 1

HeaderCheck = Callable[[list[str]], list[tuple[str | None, str]]]


@dataclass(slots=True)
class Record:
    """One record of a file: its fields, or the problem that kept the reader from reading it."""

    line: int | None
    fields: dict[str, Any] | None
    problem: ImportProblem | None = None
    whole_file: bool = False  # a problem of the file (empty, not a list, bad header), not of a record


class Progress:
    """Count rows for a progress callback (a tqdm bar's update), reporting every 1,000 rows."""

    __slots__ = ("progress", "pending")

    def __init__(self, progress: Callable[[int], object] | None) -> None:
        self.progress = progress
        self.pending = 0

    def __call__(self) -> None:
        self.pending += 1
        if self.pending >= 1000:
            self.flush()

    def flush(self) -> None:
        if self.progress is not None and self.pending:
            self.progress(self.pending)
        self.pending = 0


# A CSV column that says the other cells of its row were escaped against spreadsheet formulas:
# `'` there means one `'` is taken off every other cell at the start of each of its lines (the
# cell's start, and after every CR or LF) that has one (`calibrate export labels` writes
# `'=SUM(A1)` for the text `=SUM(A1)`, `''x` for `'x`, and `a\n'=x` for `a\n=x`). Without the
# column, or with the cell empty, cells are read as they are. See docs/formats.md.
ESCAPE_COLUMN = "csv_escape"
ESCAPE_MARK = "'"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A line start inside a cell: where a spreadsheet that splits on a lone CR or LF starts a new cell.
_LINE_STARTS = re.compile(r"(?<=[\r\n])(?=[=+\-@\t'])")
_UNESCAPE = re.compile(r"(?:^|(?<=[\r\n]))'")
_NEEDS_QUOTES = re.compile(r'[,"\r\n]')


def escape_cell(text: str) -> str:
    """Return a CSV cell a spreadsheet will not read as a formula, that `_read_csv` reads back as `text`.

    Used with an ESCAPE_COLUMN cell of `'`: a cell that starts like a formula, or with `'`
    itself, gets one `'` in front (numbers such as -2 or +3.5 are left as they are), and so does
    every line inside the cell (after a CR or LF) that starts like one.
    """
    if text.startswith(ESCAPE_MARK) or (text.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.match(text)):
        text = ESCAPE_MARK + text
    return _LINE_STARTS.sub(ESCAPE_MARK, text) if "\r" in text or "\n" in text else text


def unescape_cell(text: str) -> str:
    """Return the text `escape_cell` was given: one `'` off the cell's start and off every line start inside it."""
    return _UNESCAPE.sub("", text)


def csv_text(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """Return rows as formula-safe CSV that the imports read back exactly (`csv_lines`, joined)."""
    return "".join(csv_lines(header, rows))


def csv_lines(header: Iterable[str], rows: Iterable[Iterable[str]]) -> Iterator[str]:
    """Yield the header line, then each row's line, of formula-safe CSV: an ESCAPE_COLUMN, every cell escaped.

    Every cell holding a comma, a double quote, a CR or an LF is quoted (the csv module, with a
    "\n" line terminator, leaves a lone CR unquoted, which a reader takes for a new row).
    """
    def line(cells: Iterable[str]) -> str:
        return ",".join('"' + cell.replace('"', '""') + '"' if _NEEDS_QUOTES.search(cell) else cell for cell in cells) + "\n"

    yield line([*header, ESCAPE_COLUMN])
    for row in rows:
        yield line([*(escape_cell(cell) for cell in row), ESCAPE_MARK])


_PLAIN_NUMBER = re.compile(r"^[-+]?\d+(\.\d+)?$")


class _Stop(Exception):
    """The rest of the file cannot be read; carries the last problem."""

    def __init__(self, line: int | None, message: str, *, whole_file: bool = False, field: str | None = None) -> None:
        super().__init__(message)
        self.problem = ImportProblem(line, field, message)
        self.whole_file = whole_file


def detect_format(path: str | Path, fmt: str | None = None) -> str:
    """Return the format of a file: `fmt` if given, else from its extension."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise reject(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix not in EXTENSIONS:
        raise reject(f"cannot tell the format of {Path(path).name!r} from its extension "
                     f"(.jsonl, .ndjson, .json or .csv): give --format {'|'.join(FORMATS)}")
    return EXTENSIONS[suffix]


def read_records(source: str | Path | IO[bytes], fmt: str, *, header_check: HeaderCheck | None = None) -> Iterator[Record]:
    """Yield the records of a file (a path, or a binary file object left open) lazily.

    `header_check` (CSV only) gets the column names and returns (column, message) problems;
    if it returns any, they are yielded at the header's line and the rows are not read.
    An empty file yields a single problem record.
    """
    opened = open(source, "rb") if isinstance(source, (str, Path)) else nullcontext(source)
    with opened as fh:
        if fmt == "jsonl":
            reader = _read_jsonl(fh)
        elif fmt == "json":
            reader = _read_json_list(fh)
        elif fmt == "csv":
            reader = _read_csv(fh, header_check)
        else:
            raise ValueError(f"unknown format {fmt!r}")
        count = 0
        try:
            for record in reader:
                count += 1
                yield record
        except _Stop as stop:
            yield Record(stop.problem.line, None, stop.problem, whole_file=stop.whole_file)
            return
        if not count:
            yield Record(None, None, ImportProblem(None, None, EMPTY_FILE), whole_file=True)


def _not_utf8(error: UnicodeDecodeError, *, in_line: bool = True) -> str:
    where = f" at byte {error.start + 1} of the line" if in_line else ""
    return f"not valid UTF-8 (byte 0x{error.object[error.start]:02x}{where}); save the file as UTF-8"


def json_line_error(exc: json.JSONDecodeError, text: str) -> str:
    """Return the problem of one JSONL line that json could not parse, at its column; say when it looks cut short."""
    if exc.msg.startswith("Unterminated string"):
        return (f"not valid JSON: a string starting at column {exc.colno} is still open where the line ends "
                f"(column {len(text) + 1}): is it cut short?")
    if exc.pos >= len(text):
        return f"not valid JSON: {exc.msg} (column {exc.colno}, where the line ends: is it cut short?)"
    return f"not valid JSON: {exc.msg} (column {exc.colno})"


def utf8_lines(fh: IO[bytes]) -> Iterator[tuple[int, str | None, str | None]]:
    """Yield (line number, text, problem) for every line but blank ones: the text (a first line without its byte order
    mark), or None and why when the line is not UTF-8."""
    for number, raw in enumerate(fh, start=1):
        if number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8):]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield number, None, _not_utf8(exc)
            continue
        if text and not text.isspace():
            yield number, text, None


def _read_jsonl(fh: IO[bytes]) -> Iterator[Record]:
    loads = load_json
    for number, text, problem in utf8_lines(fh):
        if text is None:
            yield Record(number, None, ImportProblem(number, None, problem))
            continue
        # Without its line break: a cut-short line's error would be at "line 2, column 1" of the text.
        text = text.rstrip("\r\n")
        try:
            value = loads(text)
        except json.JSONDecodeError as exc:
            yield Record(number, None, ImportProblem(number, None, json_line_error(exc, text)))
            continue
        except NestingTooDeep as exc:
            yield Record(number, None, ImportProblem(number, exc.field, str(exc)))
            continue
        if type(value) is not dict:
            yield Record(number, None, ImportProblem(number, None, f"must be a JSON object ({{...}}), found {kind_of(value)}"))
            continue
        yield Record(number, value)


class _JsonBuffer:
    """A window over a UTF-8 byte stream decoded to text, tracking the line at `pos`."""

    __slots__ = ("fh", "decoder", "text", "pos", "line", "eof", "newlines_read")

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.pos = 0
        self.line = 1
        self.eof = False
        self.newlines_read = 0  # in the bytes read so far: the line of a decoding error

    def fill(self, size: int = CHUNK) -> None:
        """Read up to `size` more bytes, dropping the text before `pos`."""
        data = self.fh.read(size)
        try:
            more = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            line = self.newlines_read + exc.object[: exc.start].count(b"\n") + 1
            raise _Stop(line, _not_utf8(exc, in_line=False)) from None
        self.newlines_read += data.count(b"\n")
        if not data:
            self.eof = True
        if self.pos == 0 and self.line == 1 and not self.text and more.startswith("\ufeff"):
            more = more[1:]
        self.text = self.text[self.pos:] + more
        self.pos = 0

    def advance(self, to: int) -> None:
        """Move `pos` to `to`, counting the lines passed."""
        self.line += self.text.count("\n", self.pos, to)
        self.pos = to

    def peek(self) -> str:
        """Skip whitespace and return the next character ("" at the end of the file)."""
        while True:
            text, pos = self.text, self.pos
            end = len(text)
            while pos < end and text[pos] in " \t\r\n":
                pos += 1
            self.advance(pos)
            if pos < end:
                return text[pos]
            if self.eof:
                return ""
            self.fill()


def _read_json_list(fh: IO[bytes]) -> Iterator[Record]:
    """Parse a top-level JSON list element by element with raw_decode over a sliding buffer."""
    buf = _JsonBuffer(fh)
    raw_decode = json.JSONDecoder().raw_decode
    first = buf.peek()
    if first == "":
        return
    if first != "[":
        kind = {"{": "an object", '"': "a string", "n": "null"}.get(first, "something else")
        raise _Stop(buf.line, f"the file must hold a JSON list of objects ([{{...}}, {{...}}]), found {kind}",
                    whole_file=True)
    buf.advance(buf.pos + 1)
    if buf.peek() == "]":
        buf.advance(buf.pos + 1)
        _expect_end(buf)
        return
    while True:
        line = buf.line
        value, end = _next_element(buf, raw_decode)
        yield _element_record(line, value)
        buf.advance(end)
        sep = buf.peek()
        if sep == ",":
            buf.advance(buf.pos + 1)
            if buf.peek() == "]":
                raise _Stop(buf.line, "not valid JSON: a comma before ']' (trailing comma)")
            continue
        if sep == "]":
            buf.advance(buf.pos + 1)
            _expect_end(buf)
            return
        if sep == "":
            raise _Stop(buf.line, "not valid JSON: the list is not closed (']' is missing at the end of the file)")
        raise _Stop(buf.line, "not valid JSON: expected ',' or ']' after an element of the list")


def _next_element(buf: _JsonBuffer, raw_decode: Callable[[str, int], tuple[Any, int]]) -> tuple[Any, int]:
    """Parse the list's element at the buffer's position, reading more of the file while it may be cut short; return it
    and where it ends."""
    line, size = buf.line, CHUNK
    while True:
        try:
            value, end = raw_decode(buf.text, buf.pos)
        except RecursionError:
            # The rest of the list cannot be parsed past this element: its last problem.
            raise _Stop(line, str(NestingTooDeep(None)), field=deep_field(buf.text[buf.pos:], MAX_NESTING)) from None
        except json.JSONDecodeError as exc:
            # Only an error at the end of the buffer (or an open string) may be a cut element;
            # one earlier is final, so a bad element never makes us read the rest of the file.
            if buf.eof or not (exc.msg.startswith("Unterminated string") or exc.pos >= len(buf.text) - 64):
                at = buf.line + buf.text.count("\n", buf.pos, exc.pos)
                raise _Stop(at, f"not valid JSON: {exc.msg}") from None
        else:
            # An element that ends exactly at the end of the buffer may continue (a number).
            if end < len(buf.text) or buf.eof:
                return value, end
        buf.fill(size)
        size *= 2  # a large element is re-parsed a logarithmic number of times, not linear


def _element_record(line: int, value: Any) -> Record:
    """Return the record of one element of a JSON list: an object, or the problem it has."""
    if type(value) is not dict:
        return Record(line, None, ImportProblem(line, None, f"each element of the list must be an object ({{...}}), found {kind_of(value)}"))
    try:
        check_nesting(value)
    except NestingTooDeep as exc:
        return Record(line, None, ImportProblem(line, exc.field, str(exc)))
    return Record(line, value)


def _expect_end(buf: _JsonBuffer) -> None:
    if buf.peek() != "":
        raise _Stop(buf.line, "not valid JSON: unexpected text after the end of the list")


def _other_separator(columns: list[str]) -> str | None:
    """Return the separator a one-column header is really split by (";", tab, "|"), else None."""
    if len(columns) != 1:
        return None
    for separator in (";", "\t", "|"):
        if len([part for part in columns[0].split(separator) if part.strip()]) >= 2:
            return separator
    return None


class _CsvRows:
    """The rows of a CSV file, with the physical line they end on; lines that are not UTF-8 are read with
    replacement characters and remembered, so the row holding one is refused with the line's problem."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.physical = 0
        self.bad_lines: list[tuple[int, str]] = []  # (line, message) of lines that are not UTF-8
        self.reader = csv.reader(self._lines(), strict=True)

    def _lines(self) -> Iterator[str]:
        for raw in self.fh:
            self.physical += 1
            if self.physical == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.bad_lines.append((self.physical, _not_utf8(exc)))
                yield raw.decode("utf-8", "replace")

    def next(self) -> list[str] | None:
        """Return the next row, None at the end of the file."""
        try:
            return next(self.reader)
        except StopIteration:
            return None
        except csv.Error as exc:
            raise _Stop(self.physical, f"not valid CSV: {exc}") from None


def _read_csv(fh: IO[bytes], header_check: HeaderCheck | None) -> Iterator[Record]:
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)
    rows = _CsvRows(fh)
    header = rows.next()
    while header is not None and not any(cell.strip() for cell in header):
        header = rows.next()
    if header is None:
        return
    header_line = rows.reader.line_num
    if rows.bad_lines:
        raise _Stop(*rows.bad_lines[0], whole_file=True)
    columns = [cell.strip() for cell in header]
    problems = _header_problems(columns, header_check)
    if problems:
        for field, message in problems:
            yield Record(header_line, None, ImportProblem(header_line, field, message), whole_file=True)
        return
    escape = columns.index(ESCAPE_COLUMN) if ESCAPE_COLUMN in columns else None
    last = rows.reader.line_num
    while True:
        row = rows.next()
        if row is None:
            return
        start, last = last + 1, rows.reader.line_num
        if rows.bad_lines:
            line, message = rows.bad_lines[0]
            rows.bad_lines.clear()
            yield Record(line, None, ImportProblem(line, None, message))
        elif any(cell.strip() for cell in row):  # blank lines and rows of empty cells, as spreadsheets leave at the end
            yield _csv_record(start, row, columns, escape)


def _header_problems(columns: list[str], header_check: HeaderCheck | None) -> list[tuple[str | None, str]]:
    """Return the problems of a CSV header: another separator, a column without a name or named twice, then the
    import's own check (its required and known columns)."""
    separator = _other_separator(columns)
    if separator:
        # One column named "id;question;…": every required column would be reported missing.
        names = {";": "semicolons", "\t": "tabs", "|": "vertical bars"}[separator]
        return [(None, f"the header is one column, {columns[0]!r}: the file looks separated by {names}, and calibrate reads "
                       "comma-separated CSV; save it with commas (in a spreadsheet: CSV UTF-8, comma delimited)")]
    problems: list[tuple[str | None, str]] = []
    for position, name in enumerate(columns, start=1):
        if not name:
            problems.append((None, f"column {position} of the header has no name (a pandas index? write the CSV with index=False)"))
    seen: set[str] = set()
    for name in columns:
        if name and name in seen:
            problems.append((name, "the header names this column twice"))
        seen.add(name)
    if not problems and header_check is not None:
        problems = header_check([name for name in columns if name != ESCAPE_COLUMN])
    return problems


def _csv_record(start: int, row: list[str], columns: list[str], escape: int | None) -> Record:
    """Return the record of one CSV row: its non-empty cells by column, unescaped, or the problem it has."""
    if len(row) != len(columns):
        return Record(start, None, ImportProblem(start, None, f"the row has {len(row)} cells, the header has {len(columns)} columns"))
    if escape is not None:
        marker = row[escape]
        if marker not in ("", ESCAPE_MARK):
            return Record(start, None, ImportProblem(start, ESCAPE_COLUMN, f"must be {ESCAPE_MARK} or empty, got {marker[:20]!r}"))
        if marker:
            row = [unescape_cell(cell) if ESCAPE_MARK in cell else cell for cell in row]
        row[escape] = ""
    return Record(start, {name: cell for name, cell in zip(columns, row, strict=False) if cell != ""})
