"""Which characters a name, a label or a line may carry is said once (safeio/text.py), and every site
that checks text reads it: a field of a catalog, of a probe result and of a run manifest (one_line), a
command-line value (options.check_text, and each item of a list option) and text shown on a terminal
(output.safe_text). Each site refuses, or removes, exactly what it did before the rule had one home;
the expected sets are written here from Unicode's own category (Cc), not from the rule's code."""

from __future__ import annotations

import argparse
import unicodedata

import pytest
from pydantic import TypeAdapter, ValidationError

from advisor.commands.common import add_list_option
from advisor.ec2.manifest import S3Key
from advisor.errors import AdvisorError
from advisor.options import check_text
from advisor.output import safe_text
from catalog.models import Text as CatalogText
from lightning_module.contract.result import Text as ResultText
from safeio import first_error

CONTROLS = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cc"]
BIDI = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]  # LRE..RLO, LRI..PDI
ORDINARY = [" ", "a", "é", "±", "—", "\u00a0", "\u200b", "\u2028", "\ufeff", "😀"]
CANDIDATES = CONTROLS + BIDI + ORDINARY


def test_the_expected_sets_are_c0_del_and_c1():
    assert len(CONTROLS) == 65 and CONTROLS[0] == "\x00" and CONTROLS[-1] == "\x9f"
    assert all(unicodedata.bidirectional(c) in ("LRE", "RLE", "PDF", "LRO", "RLO", "LRI", "RLI", "FSI", "PDI")
               for c in BIDI)


def _refused_by_field(annotated) -> set[str]:
    adapter, refused = TypeAdapter(annotated), set()
    for c in CANDIDATES:
        try:
            adapter.validate_python(f"a{c}b")
        except ValidationError as e:
            assert first_error(e).msg == "contains control characters"
            refused.add(c)
    return refused


@pytest.mark.parametrize("annotated", [CatalogText, ResultText, S3Key], ids=["catalog", "probe-result", "manifest"])
def test_a_field_from_a_file_refuses_control_characters_but_a_tab(annotated):
    assert _refused_by_field(annotated) == set(CONTROLS) - {"\t"}


def test_a_command_line_value_refuses_every_control_character_tab_included():
    refused = set()
    for c in CANDIDATES:
        try:
            check_text(f"a{c}b", "--workload")
        except AdvisorError as e:
            assert str(e) == f"--workload {repr(f'a{c}b'.encode())[1:]} contains control characters"
            refused.add(c)
    assert refused == set(CONTROLS)


def test_each_item_of_a_list_option_is_checked_the_same_way(capsys):
    parser = argparse.ArgumentParser(prog="advisor", exit_on_error=False)
    add_list_option(parser, "--region", metavar="R", help="regions")
    refused = set()
    for c in CANDIDATES:
        try:
            parser.parse_args(["--region", f"a{c}b"])
        except SystemExit:
            assert "argument --region: " in capsys.readouterr().err
            refused.add(c)
    assert refused == set(CONTROLS)


def test_shown_text_loses_control_characters_and_bidi_overrides_and_keeps_the_rest():
    for c in CANDIDATES:
        shown = safe_text(f"a{c}b")
        if c in ("\t", "\n"):
            assert shown == "a b"
        elif c in CONTROLS or c in BIDI:
            # ESC and C1's CSI start an escape sequence, which takes the 'b' along as its last byte
            assert shown == ("a" if c in ("\x1b", "\x9b") else "ab")
        else:
            assert shown == f"a{c}b"
        assert safe_text(f"a{c}b", newlines=True) == ("a\nb" if c == "\n" else "a\tb" if c == "\t" else shown)
