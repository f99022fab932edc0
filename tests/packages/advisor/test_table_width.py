"""Tables fit the terminal they print in: $COLUMNS when set, the terminal's width when stdout is
one, else 100 columns; a note column wraps between its parts or moves under the table; `--wide`
prints every cell on its line; json and csv never change with the width. Every command that
prints a table is run here at 100 columns with long notes (launch's plan, status and cancel
tables: tests/packages/advisor/ec2/test_launch.py)."""

from __future__ import annotations

import io
import json
import os
import pty

import pytest
from factories import probe_result

from advisor import output
from advisor.output import fit_table, width
from lightning_module.contract.result import RungResult

LONG_NOTE = ("the first part of a long note; a second part that says more than fits on a line of a narrow "
             "column; a third; and a fourth part, whose words go on and on well past the width of any terminal")


def lines_of(text: str) -> list[str]:
    return text.splitlines()


def test_columns_wins_then_the_terminal_then_100(monkeypatch):
    monkeypatch.setenv("COLUMNS", "123")
    assert width(io.StringIO()) == 123
    monkeypatch.delenv("COLUMNS")
    assert width(io.StringIO()) == output.DEFAULT_WIDTH == 100  # a pipe or a file
    leader, follower = pty.openpty()
    try:
        os.set_blocking(follower, True)
        import fcntl
        import struct
        import termios

        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 87, 0, 0))
        with os.fdopen(os.dup(follower), "w") as tty:
            assert width(tty) == 87
    finally:
        os.close(leader)
        os.close(follower)
    monkeypatch.setenv("COLUMNS", "10")
    assert width(io.StringIO()) == output.LEAST_WIDTH  # nothing is laid out narrower than this
    monkeypatch.setenv("COLUMNS", "not a number")
    assert width(io.StringIO()) == 100
    output.set_wide(True)
    try:
        assert width(io.StringIO()) is None
    finally:
        output.set_wide(False)


def test_a_note_wraps_in_its_column_when_there_is_room_else_goes_under():
    headers = ["instance", "cost", "note"]
    rows = [["g5.xlarge", "1.00", LONG_NOTE], ["c7i.2xlarge", "2.00", ""]]
    wide = fit_table(headers, [r[:] for r in rows], 80, notes_at=2)
    assert max(map(len, lines_of(wide))) <= 80 and "[1]" not in wide
    assert any(ln.endswith("the first part of a long note;") for ln in lines_of(wide))  # broken between parts
    narrow = fit_table(headers, [r[:] for r in rows], 40, notes_at=2)
    assert max(map(len, lines_of(narrow))) <= 40
    body = lines_of(narrow)
    assert body[2].endswith("[1]") and body[3].rstrip().endswith("2.00")  # the row with no note has no mark
    under = narrow[narrow.index("\n[1] ") + 5:]
    assert " ".join(under.split()) == LONG_NOTE
    assert fit_table(headers, [r[:] for r in rows], None, notes_at=2).count("\n") == 4  # --wide: one line a row


def test_words_stay_whole_while_the_table_can_fit_otherwise():
    headers = ["id", "instance_type", "text"]
    rows = [["f50d5e93f0b5", "p6-b200.48xlarge", "a b c d e f g h i j k l m n o p q r s t u v w x y z " * 3]]
    out = fit_table(headers, rows, 60)
    assert max(map(len, lines_of(out))) <= 60
    assert "f50d5e93f0b5" in out and "p6-b200.48xlarge" in out
    assert output.wrap_header("usd_per_hour", 9) == "usd_per_\nhour"  # a key's header breaks after its '_'
    assert output.wrap_header("samples/s (source)", 11) == "samples/s\n(source)"


def test_names_and_numbers_break_at_their_punctuation_before_a_word_breaks():
    headers = ["instance", "market", "source", "samples/$"]
    rows = [["g5.2xlarge", "spot+od-fallback", "926 (reference)", "8,092,303"]]
    out = fit_table(headers, rows, 42)  # too narrow for every word whole
    assert max(map(len, lines_of(out))) <= 42 and "8,092,303" in out  # a number stays whole
    assert "(reference)" in out  # the word stays whole ...
    assert "g5." in out and "2xlarge" in out and "spot+" in out  # ... names break after their punctuation
    assert output.wrap_words("spot+od-fallback", 9) == "spot+od-\nfallback"
    assert output.wrap_words("926 (reference)", 11) == "926\n(reference)"
    assert output.wrap_words("8,092,303", 6) == "8,092,\n303"  # a number breaks only when nothing else fits
    assert output.wrap_words("supercalifragilistic", 8) == "supercal\nifragili\nstic"  # only when nothing else fits


JOBS = [
    ["--budget", "500", "--deadline", "2d", "--samples", "1e8"],
    ["--budget", "20", "--deadline", "12h", "--samples", "1e8", "--market", "any"],
    ["--budget", "20", "--deadline", "12h", "--samples", "1e8"],  # nothing fits: the 'needs' column
    ["--budget", "500", "--deadline", "2d", "--samples", "1e8", "--objective", "pareto", "--show-excluded"],
]


def fits(out: str, room: int = 100) -> None:
    """Every line within room, but a command line shown for copying (indented two spaces)."""
    too_wide = [ln for ln in lines_of(out) if len(ln) > room and not ln.startswith("  ")]
    assert not too_wide, "\n".join(too_wide)


@pytest.mark.parametrize("job", JOBS, ids=["main", "spot", "nothing-fits", "pareto-excluded"])
def test_recommend_fits_100_columns_and_json_csv_do_not_change(cli, monkeypatch, job):
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = cli("recommend", *job)
    assert code == 0, err
    fits(out)
    assert "[1] " in out  # the notes went under the table at this width
    code, wide, _ = cli("recommend", *job, "--wide")
    assert max(map(len, lines_of(wide))) > 100 and "\n[1] " not in wide
    for fmt in ("json", "csv"):
        monkeypatch.setenv("COLUMNS", "100")
        narrow = cli("recommend", *job, "--format", fmt)[1]
        monkeypatch.setenv("COLUMNS", "40")
        assert cli("recommend", *job, "--format", fmt)[1] == narrow
        assert cli("recommend", *job, "--format", fmt, "--wide")[1] == narrow
        monkeypatch.delenv("COLUMNS")
        assert cli("recommend", *job, "--format", fmt)[1] == narrow


def split_values(out: str) -> list[str]:
    """The lines of every table in `out` that carry part of a value split from its row: a line under
    a table's dashes that starts with a space and has text left of the table's last column (the
    notes, which may wrap in their own column). An empty list: every value whole on its row's line."""
    bad, last = [], None
    for ln in lines_of(out):
        if set(ln.replace(" ", "")) == {"-"} and ln.startswith("-"):
            last = ln.rstrip().rfind("  -") + 2 if "  -" in ln else 0  # where the last column starts
            continue
        if last is None or not ln.strip() or ln.startswith("Not shown at"):
            last = None
            continue
        if ln[0] == " " and ln[:last].strip():
            bad.append(ln)
    return bad


def test_split_values_finds_a_split_value():
    table = fit_table(["rank", "market", "note"], [["1", "spot+od-fallback", "a; b"]], 20, notes_at=2)
    assert split_values(table)  # 'spot+od-' / 'fallback': the check can fail
    assert not split_values(fit_table(["instance", "note"], [["g5.xlarge", LONG_NOTE]], 60, notes_at=1))


@pytest.mark.parametrize("room", [80, 100])
@pytest.mark.parametrize("job", [*JOBS, [*JOBS[0], "--market", "any", "--top", "8"], [*JOBS[0], "--confidence", "0"]],
                         ids=["main", "spot", "nothing-fits", "pareto-excluded", "any-market", "point"])
def test_recommend_splits_no_value_down_to_80_columns(cli, monkeypatch, job, room):
    """Units in the headers, short words in the cells (od, spot+od; est., meas., ref.); what does
    not fit is left out in report.drop_order and named under the table, never broken."""
    monkeypatch.setenv("COLUMNS", str(room))
    code, out, err = cli("recommend", *job)
    assert code == 0, err
    fits(out, room)
    assert split_values(out) == [], out
    for dropped in (ln for ln in lines_of(out) if ln.startswith("Not shown at")):
        assert dropped.startswith(f"Not shown at {room} columns: ")
    wide = cli("recommend", *job, "--wide")[1]
    assert "Not shown at" not in wide and "samples/$" in wide


def test_the_commands_to_paste_stand_on_lines_of_their_own(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("recommend", *JOBS[0])[1]
    commands = [ln for ln in lines_of(out) if ln.startswith("  advisor ")]
    assert commands and all("#" not in ln for ln in commands)  # the why is on the line above
    above = [lines_of(out)[lines_of(out).index(c) - 1] for c in commands]
    assert all(ln.startswith("  # ") for ln in above)


@pytest.mark.parametrize("argv", [
    ("references", "list"),
    ("references", "list", "--accelerator", "gaudi2,trainium"),
    ("references", "check"),
    ("references", "check", "--rows"),
    ("catalog", "show"),
    ("catalog", "show", "--family", "p5,g6e,trn1"),
    ("catalog", "info"),
])
def test_catalog_and_references_fit_100_columns(cli, monkeypatch, argv):
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = cli(*argv)
    assert code == 0, err
    fits(out)
    assert cli(*argv, "--wide")[1] != out or max(map(len, lines_of(out))) <= 100


def test_results_list_and_show_fit_100_columns_with_long_notes(cli, monkeypatch, tmp_path):
    r = probe_result("p6-b200.48xlarge", 1234.5, model="resnet50")
    r.ladder.append(RungResult(rung="channels_last", config=r.config, status="skipped", note=LONG_NOTE))
    r.ladder.append(RungResult(rung="ipex", config=r.config, status="not-installed", note=LONG_NOTE))
    path = tmp_path / "r.json"
    path.write_text(r.model_dump_json())
    assert cli("results", "import", str(path))[0] == 0
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = cli("results", "list")
    assert code == 0 and r.result_id[:12] in out and "p6-b200.48xlarge" in out
    fits(out)
    code, out, _ = cli("results", "show", r.result_id[:8])
    assert code == 0
    fits(out)
    assert "\n[1] " in out and " ".join(out[out.index("\n[1] ") + 5:].split("\n[2]")[0].split()) == LONG_NOTE
    rows = json.loads(cli("results", "list", "--format", "json")[1])
    monkeypatch.setenv("COLUMNS", "40")
    assert json.loads(cli("results", "list", "--format", "json")[1]) == rows


def test_an_id_stays_whole_while_headers_can_wrap():
    """results pull at 100 columns broke its 32-character result id (80d06ce8ddc74b2e9fe91fb338 |
    51a017) though wrapping the headers samples_per_sec and instance_type made room: an id shown is
    one to copy."""
    headers = ["run_id", "instance_type", "status", "result_id", "samples_per_sec", "detail"]
    rows = [["20261121-065507-a35712", "g5.xlarge", "duplicate", "80d06ce8ddc74b2e9fe91fb33851a017", "412.7", ""],
            ["20261121-065507-a35712", "g5g.xlarge", "failed", "", "", LONG_NOTE]]
    out = fit_table(headers, [r[:] for r in rows], 100, notes_at=5)
    assert max(map(len, lines_of(out))) <= 100
    assert "80d06ce8ddc74b2e9fe91fb33851a017" in out and "20261121-065507-a35712" in out
    assert {"instance_", "samples_"} <= set(lines_of(out)[0].split())  # the headers wrapped instead
    # when even whole words cannot fit, a long word still breaks rather than overflow
    assert max(map(len, lines_of(fit_table(headers, [r[:] for r in rows], 60, notes_at=5)))) <= 60


def test_a_table_of_more_columns_than_fit_prints_a_block_per_row():
    """`results export --format table` has 25 columns: at 100 they were cut to 8 each and still ran
    to 220 columns, every value broken. Past what any column widths can hold, each row is a block
    of `header  value` lines."""
    headers = [f"column_{i}_of_many" for i in range(25)]
    rows = [[f"value-{i}-{r}" for i in range(25)] for r in range(2)]
    rows[1][3] = LONG_NOTE
    out = fit_table(headers, [r[:] for r in rows], 100, notes_at=3)
    assert max(map(len, lines_of(out))) <= 100
    first, second = out.split("\n\n")
    assert [ln.split()[:2] for ln in lines_of(first)] == [[h, v] for h, v in zip(headers, rows[0])]
    assert " ".join(second.split()).startswith(" ".join(f"{h} {v}" for h, v in zip(headers[:3], rows[1][:3])))
    assert " ".join(LONG_NOTE.split()) in " ".join(second.split())  # the note whole, beside its header


def test_results_export_as_a_table_fits_100_columns(cli, monkeypatch, tmp_path):
    r = probe_result("p6-b200.48xlarge", 1234.5, model="resnet50")
    path = tmp_path / "r.json"
    path.write_text(r.model_dump_json())
    assert cli("results", "import", str(path))[0] == 0
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = cli("results", "export", "--format", "table")
    assert code == 0
    fits(out)
    assert r.result_id in out and "p6-b200.48xlarge" in out  # whole
    code, out, _ = cli("schema")
    assert code == 0
    fits(out)


@pytest.mark.parametrize("cols", [100, 88])
def test_in_a_real_terminal_without_columns_recommend_fits_it(tmp_path, cols):
    """The issue's own setting: a real terminal (100 x 50; and 88 wide, which the 100-column default
    for pipes would overflow), $COLUMNS unset, the command's stdout on it: every line but the indented
    command lines fits the terminal."""
    import fcntl
    import struct
    import subprocess
    import sys
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS" and not k.startswith("INSTANCE_ADVISOR_")}
    env.update(INSTANCE_ADVISOR_CACHE_DIR=str(tmp_path / "c"), INSTANCE_ADVISOR_DATA_DIR=str(tmp_path / "d"))
    proc = subprocess.Popen([sys.executable, "-m", "advisor.cli", "recommend", *JOBS[0]], stdout=follower,
                            stderr=subprocess.DEVNULL, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=120) == 0
    out = b"".join(chunks).decode().replace("\r\n", "\n")
    assert "rank" in out and "[1] " in out
    fits(out, cols)


def test_catalog_refresh_prints_one_record_that_fits_100_columns(cli, monkeypatch):
    """Its one row was a table of six columns: at 100 the cache path and the time broke in two."""
    from catalog import clouds
    from catalog.io import SNAPSHOT_PATH, load

    snapshot = load(SNAPSHOT_PATH)
    monkeypatch.setattr(clouds, "refresher", lambda cloud: lambda **kw: snapshot)
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = cli("catalog", "refresh")
    assert code == 0, err
    fits(out)
    from advisor.paths import catalog_cache_path

    assert snapshot.fetched_at.isoformat() in out
    assert str(catalog_cache_path()) in "".join(out.split())  # a path longer than the value column wraps at a '/'
    assert cli("catalog", "refresh", "--format", "csv")[1].count("\n") == 2  # csv: still one row for a script


def test_every_command_that_prints_a_table_has_wide():
    """--wide for everything: each command with a table format takes it (results import prints one
    summary line, no table)."""
    from test_cli_options import leaf_parsers  # beside this file

    lacking = []
    for words, p in leaf_parsers():
        opts = {o: a for a in p._actions for o in a.option_strings}
        tables = "--format" in opts and "table" in opts["--format"].choices and words != ["results", "import"]
        if tables and "--wide" not in opts:
            lacking.append(" ".join(words))
    assert lacking == []
