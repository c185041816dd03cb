"""bench/cli/options.py: every bench command shows its options' defaults in --help (declared once,
by options.command), and the chat workload options multiturn and cluster share."""

import click

from bench.cli import main, options


def test_every_bench_command_shows_its_defaults():
    assert main.commands
    for name, command in main.commands.items():
        assert command.context_settings.get("show_default") is True, name
        assert not any(getattr(p, "show_default", None) is True for p in command.params), name


def test_the_chat_options_are_users_turns_and_answer_tokens():
    @options.chats(users=8)
    def chats(users: int, turns: int, answer_tokens: int) -> None: ...

    params = click.command()(chats).params
    assert [(p.name, p.default) for p in params] == [("users", 8), ("turns", 4), ("answer_tokens", 32)]
    assert main.commands["multiturn"].params[2].name == "users" and main.commands["multiturn"].params[2].default == 4
    assert main.commands["cluster"].params[3].name == "users" and main.commands["cluster"].params[3].default == 8
