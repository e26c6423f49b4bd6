"""Option errors are one line, like every other bad input: what is wrong, and where the usage is."""

from __future__ import annotations

import pytest

from elastic.cli import main


def _stderr_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code  # type: ignore[assignment]
    assert code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["compare", "--workflow", "demo3", "--runs", "0"],
            "elastic compare: error: argument --runs: expected",
        ),
        (
            ["run", "--workflow", "demo3", "--strategy", "asa", "--job-cores", "0"],
            "elastic run: error: argument",
        ),
        (["compare", "--strategies", "bigjob-fine"], "(bigjob-fine: --strategies bigjob --shapes fine)"),
        (["compare", "--shapes", "round"], "unknown allocation shape round"),
        (
            ["run", "--strategy", "asa-fine"],
            "asa-fine is a row label of elastic compare; here: --strategy asa --job-cores 1",
        ),
        (
            ["compare", "--job-cores", "1"],
            "elastic compare: error: unrecognized arguments: --job-cores 1; a ",
        ),
        (["bogus"], "elastic: error: argument COMMAND: invalid choice: 'bogus'"),
        (["--bogus"], "elastic: error: unrecognized arguments: --bogus"),
    ],
)
def test_an_option_error_is_one_line_saying_where_the_usage_is(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _stderr_of(argv, capsys)
    assert err.count("\n") == 1, err
    assert says in err
    assert err.rstrip().endswith("-h)") and "usage: elastic" in err
