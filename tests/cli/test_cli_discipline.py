"""The command line a user meets: no option is taken from an abbreviation, every subcommand and
option says what it does and its default, a subcommand's mistakes are shown with its own usage,
and an option that needs mutations is refused without `--allow-mutations`."""

from __future__ import annotations

import argparse

import pytest

from rl_conformance.cli import build_parser, main


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _helps() -> dict[str, str | None]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {choice.dest: choice.help for choice in action._choices_actions}


def test_every_subcommand_says_what_it_does() -> None:
    helps = _helps()
    assert set(helps) == set(_subcommands())
    assert all(helps.values()), [name for name, text in helps.items() if not text]


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_option_says_what_it_does_and_its_default(name: str) -> None:
    parser = _subcommands()[name]
    assert parser.allow_abbrev is False
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        label = "/".join(action.option_strings) or action.dest
        assert action.help, f"{name} {label}: no help"
        if action.option_strings and action.default not in (None, False, [], argparse.SUPPRESS):
            assert "default" in action.help, f"{name} {label}: default {action.default!r} unsaid"


def test_an_abbreviated_option_is_refused_with_the_option_meant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--allow-mutation", "--all-workers"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "rl-conformance run: unknown option --allow-mutation; did you mean --allow-mutations? "
        "(rl-conformance run --help lists every option)\n"
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["certify-adapter", "--reference", "--familly", "sglang"],
            "rl-conformance certify-adapter: unknown option --familly; did you mean --family?",
        ),
        (["diff", "--jsn", "a.json", "b.json"], "unknown option --jsn; did you mean --json?"),
        (["rn"], "rl-conformance: unknown command 'rn'; did you mean run?"),
        ([], "rl-conformance: name a command: `rl-conformance run` tests our fakes"),
        (
            ["run", "http://127.0.0.1:8000"],
            "http://127.0.0.1:8000 is given without its flag; did you mean --frontend "
            "http://127.0.0.1:8000?",
        ),
        (["run", "tests"], "unexpected argument 'tests'; arguments for pytest go after --"),
        (
            ["run", "--frontend", "http://h:8000", "--backend", "vlm"],
            "--backend: 'vlm' is not one of vllm, sglang, trtllm; did you mean vllm?",
        ),
        (["diff", "old.json"], "rl-conformance diff: missing NEW.json"),
        (["run", "--seed"], "rl-conformance run: --seed needs a value"),
    ],
)
def test_a_mistake_is_one_sentence_with_its_fix(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Never the whole usage (25 lines for `run`), never pytest's words: one line naming the
    mistake and the fix, and where --help lists the rest."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert said in err
    assert len(err.splitlines()) == 1, err
    assert "usage:" not in err and "pytest exit code" not in err


def test_arguments_after_a_double_dash_go_to_pytest_unchanged() -> None:
    from rl_conformance.cli.mistakes import after_double_dash

    assert after_double_dash(["run", "--", "-k", "stream"]) == 2
    assert after_double_dash(["run", "--fake", "vllm"]) == 0


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--update-model-path", "/a", "--update-model-path", "/b"], "add --allow-mutations"),
        (["--weight-transfer", "/a.json"], "--weight-transfer drive weight updates"),
        (["--update-model-path", "/a", "--read-only"], "exclude each other"),
    ],
)
def test_a_weight_update_option_needs_mutations_on_a_users_deployment(
    extra: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--frontend", "http://127.0.0.1:9", "--backend", "vllm", *extra])
    assert code == 2
    assert expected in capsys.readouterr().err
