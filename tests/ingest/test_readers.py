"""The readers: records and their line numbers in JSONL, JSON and CSV, lazily."""

from __future__ import annotations

import io
import json

import pytest

from calibrate.ingest import ImportRejected
from calibrate.ingest.readers import CHUNK, EMPTY_FILE, detect_format, read_records


def records(data: bytes, fmt: str, **kwargs):
    return list(read_records(io.BytesIO(data), fmt, **kwargs))


def lines_and_fields(data: bytes, fmt: str):
    return [(r.line, r.fields) for r in records(data, fmt)]


@pytest.mark.parametrize(("name", "fmt"), [
    ("a.jsonl", "jsonl"), ("a.NDJSON", "jsonl"), ("a.json", "json"), ("a.csv", "csv"), ("dir.v2/a.csv", "csv"),
])
def test_format_is_detected_from_the_extension(name, fmt):
    assert detect_format(name) == fmt


def test_format_option_overrides_the_extension_and_unknown_extensions_are_refused():
    assert detect_format("export.txt", "jsonl") == "jsonl"
    with pytest.raises(ImportRejected, match=r"cannot tell the format of 'export.txt'.*--format jsonl\|json\|csv"):
        detect_format("export.txt")


def test_jsonl_gives_each_object_with_its_line_skipping_blank_lines_and_a_bom():
    data = b'\xef\xbb\xbf{"a": 1}\n\n  \n{"a": 2}\r\n{"a": "\xc3\xa9"}'
    assert lines_and_fields(data, "jsonl") == [(1, {"a": 1}), (4, {"a": 2}), (5, {"a": "é"})]


@pytest.mark.parametrize(("data", "line", "message"), [
    (b'{"a": 1}\n{"a": 1,}\n', 2, "not valid JSON: Expecting property name"),
    (b'{"a": 1}\n[1, 2]\n', 2, "must be a JSON object ({...}), found a list"),
    (b'{"a": 1}\n{"a": "\xff"}\n', 2, "not valid UTF-8 (byte 0xff at byte 8 of the line)"),
    # A line cut short is reported where it ends, not at "column 1" of the line after its line break.
    (b'{"a": 1}\n{"id": "s2", "answer": 17\n', 2,
     "not valid JSON: Expecting ',' delimiter (column 26, where the line ends: is it cut short?)"),
    (b'{"a": 1}\n{"id": "s2", "answer": "Yes, it\r\n', 2,
     "not valid JSON: a string starting at column 24 is still open where the line ends (column 32): is it cut short?"),
    (b'{"a": 1}\n{"id" "s2"}\n', 2, "not valid JSON: Expecting ':' delimiter (column 7)"),
])
def test_jsonl_problems_name_their_line_and_the_next_lines_are_still_read(data, line, message):
    found = records(data + b'{"b": 2}\n', "jsonl")
    assert [r.line for r in found] == [1, line, 3]
    assert found[1].fields is None and found[1].problem.line == line
    assert message in str(found[1].problem)
    assert found[2].fields == {"b": 2}


def test_json_list_gives_each_element_with_the_line_it_starts_on():
    data = b'[\n  {"a": 1},\n  {\n    "a": 2,\n    "b": [1,\n 2]\n  }, {"a": 3}\n]\n'
    assert lines_and_fields(data, "json") == [(2, {"a": 1}), (3, {"a": 2, "b": [1, 2]}), (7, {"a": 3})]


def test_json_list_elements_larger_than_the_read_buffer_are_parsed_whole():
    big = "x" * (3 * CHUNK + 17)
    data = json.dumps([{"a": big}, {"a": "\u00e9" * CHUNK}, {"a": 1}], indent=1).encode()
    found = lines_and_fields(data, "json")
    assert [fields["a"] for _, fields in found] == [big, "é" * CHUNK, 1]
    assert [line for line, _ in found] == [2, 5, 8]


@pytest.mark.parametrize(("data", "line", "message"), [
    (b'{"a": 1}', 1, "the file must hold a JSON list of objects"),
    (b'\n\n"text"', 3, "found a string"),
    (b'[{"a": 1},\n {"a": }\n]', 2, "not valid JSON: Expecting value"),
    (b'[{"a": 1},\n {"a": 2},\n]', 3, "trailing comma"),
    (b'[{"a": 1}\n {"a": 2}]', 2, "expected ',' or ']'"),
    (b'[{"a": 1},\n {"a": 2}', 2, "']' is missing"),
    (b'[{"a": 1}]\n[]', 2, "unexpected text after the end of the list"),
    (b'[{"a": 1},\n{"a": "\xe9"}]', 2, "not valid UTF-8 (byte 0xe9)"),
])
def test_json_list_problems_stop_the_file_at_their_line(data, line, message):
    found = records(data, "json")
    last = found[-1]
    assert last.fields is None and last.problem.line == line, str(last.problem)
    assert message in last.problem.message


def test_json_list_elements_that_are_not_objects_are_problems_of_their_own_line():
    found = records(b'[{"a": 1},\n 7,\n {"a": 2}]', "json")
    assert [(r.line, r.fields) for r in found] == [(1, {"a": 1}), (2, None), (3, {"a": 2})]
    assert "must be an object ({...}), found a number" in found[1].problem.message


def test_a_broken_element_early_in_a_long_list_does_not_read_the_rest_of_the_file():
    data = b'[{"a": 1},\n{"a": ]},\n' + b'{"a": 1},\n' * 200_000 + b'{"a": 1}]'
    stream = io.BytesIO(data)
    found = list(read_records(stream, "json"))
    assert found[-1].problem.line == 2
    assert stream.tell() <= 2 * CHUNK


@pytest.mark.parametrize(("data", "fmt"), [
    (b"", "jsonl"), (b"\n \n", "jsonl"), (b"", "json"), (b"  []\n", "json"), (b"", "csv"), (b"id,question\n", "csv"),
])
def test_a_file_without_records_is_one_problem(data, fmt):
    found = records(data, fmt)
    assert len(found) == 1 and found[0].problem.message == EMPTY_FILE and found[0].whole_file


def test_csv_rows_start_on_their_physical_line_even_after_multi_line_cells():
    data = ('\ufeffid,question,answer\n'
            'a,"first\nsecond\nthird",x\n'
            '\n'
            'b,"q",""\n'
            'c,"say ""hi""",=1+1\r\n').encode()
    assert lines_and_fields(data, "csv") == [
        (2, {"id": "a", "question": "first\nsecond\nthird", "answer": "x"}),
        (6, {"id": "b", "question": "q"}),  # an empty cell is an absent field
        (7, {"id": "c", "question": 'say "hi"', "answer": "=1+1"}),
    ]


def test_csv_row_problems_name_their_line():
    data = b'id,question\na,"one\ntwo"\nb,q,extra\nc,\xff\nd,q\n'
    found = records(data, "csv")
    assert [(r.line, r.fields is not None) for r in found] == [(2, True), (4, False), (5, False), (6, True)]
    assert "the row has 3 cells, the header has 2 columns" in found[1].problem.message
    assert "not valid UTF-8" in found[2].problem.message


def test_csv_header_problems_stop_the_file_and_name_the_column():
    def check(columns):
        return [("answer", "missing")] if "answer" not in columns else []

    found = records(b"id,question\na,b\n", "csv", header_check=check)
    assert [(r.line, r.problem.field, r.problem.message) for r in found] == [(1, "answer", "missing")]
    found = records(b",id,id\n0,a,b\n", "csv")
    messages = [str(r.problem) for r in found]
    assert messages == ["line 1: column 1 of the header has no name (a pandas index? write the CSV with index=False)",
                        "line 1, field 'id': the header names this column twice"]


def test_csv_cells_above_the_csv_modules_default_limit_are_read():
    big = "y" * 300_000
    assert lines_and_fields(f"id,answer\na,{big}\n".encode(), "csv") == [(2, {"id": "a", "answer": big})]


def test_a_bad_csv_quote_is_a_problem_with_its_line():
    found = records(b'id,question\na,"open\nb,c\n', "csv")
    assert found[-1].problem is not None and "not valid CSV" in found[-1].problem.message


class CountingReader(io.BytesIO):
    """A file that remembers how many bytes were asked of it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.consumed = 0

    def read(self, size=-1):
        out = super().read(size)
        self.consumed += len(out)
        return out

    def readline(self, size=-1):
        out = super().readline(size)
        self.consumed += len(out)
        return out

    def __next__(self):
        out = super().__next__()
        self.consumed += len(out)
        return out


def _big_file(fmt: str, n: int = 20_000) -> bytes:
    row = {"id": "x", "question": "q" * 40, "answer": "a" * 40}
    if fmt == "jsonl":
        return b"".join(json.dumps({**row, "id": str(i)}).encode() + b"\n" for i in range(n))
    if fmt == "json":
        return b"[\n" + b",\n".join(json.dumps({**row, "id": str(i)}).encode() for i in range(n)) + b"\n]\n"
    return b"id,question,answer\n" + b"".join(f"{i},{row['question']},{row['answer']}\n".encode() for i in range(n))


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_readers_are_lazy_they_read_only_as_far_as_the_records_taken(fmt):
    data = _big_file(fmt)
    stream = CountingReader(data)
    reader = read_records(stream, fmt)
    assert stream.consumed == 0  # a generator: nothing is read before the first record is asked for
    first = next(reader)
    assert first.fields["id"] == "0"
    after_one = stream.consumed
    assert after_one <= 2 * CHUNK < len(data) / 10
    for _ in range(100):
        next(reader)
    assert stream.consumed <= after_one + 2 * CHUNK
    assert sum(1 for _ in reader) == 20_000 - 101
    assert stream.consumed == len(data)
