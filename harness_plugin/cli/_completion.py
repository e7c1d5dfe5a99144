"""`artmem completion SHELL`: tab completion for bash, zsh and fish.

The script is generated from the CLI's own parser (its commands, their aliases and options),
so it never disagrees with them. Where a command takes an experiment id, the script asks
`artmem completion ids PREFIX`, which prints the project's experiment ids (newest first) from
its cards; nothing else runs at a TAB, and `artmem --help` never loads this module.

    eval "$(artmem completion bash)"         # ~/.bashrc
    eval "$(artmem completion zsh)"          # ~/.zshrc
    artmem completion fish | source          # ~/.config/fish/config.fish
"""

from __future__ import annotations

import argparse
import shlex

from harness_plugin.cli._command import Outcome, UsageError, start

MAX_IDS = 500
# The commands whose positional arguments are experiment ids.
ID_COMMANDS = ("resolve", "show", "slice", "export", "lineage", "diff", "edit", "rm")


def completion(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Outcome:
    """The completion script for `args.shell` (from `parser`), or (`ids`) the ids it completes."""
    if args.shell == "ids":
        ids = experiment_ids(args, args.prefix or "")
        return Outcome({"experiment_ids": ids}, ids)
    if args.prefix is not None:
        raise UsageError(f"`artmem completion {args.shell}` takes no other argument")
    script = SCRIPTS[args.shell](_commands(parser))
    return Outcome({"shell": args.shell, "script": script}, script.splitlines())


def experiment_ids(args: argparse.Namespace, prefix: str) -> list[str]:
    """The project's experiment ids that start with `prefix` (with or without `exp_`)."""
    _, store = start(args)
    scan = store.scan_cards()
    cards = sorted(scan.cards, key=lambda card: (card.created_at, card.experiment_id), reverse=True)
    wanted = prefix if prefix.startswith("exp_") or not prefix else f"exp_{prefix}"
    return [card.experiment_id for card in cards if card.experiment_id.startswith(wanted)][:MAX_IDS]


class _Command:
    def __init__(self, names: list[str], options: list[str], valued: list[str]) -> None:
        self.names = names  # the command, then its aliases
        self.options = options
        self.valued = valued  # options that take a value


def _commands(parser: argparse.ArgumentParser) -> list[_Command]:
    commands: list[_Command] = []
    for action in parser._subparsers._group_actions if parser._subparsers else ():  # noqa: SLF001
        if not isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            continue
        seen: dict[int, _Command] = {}
        for name, sub in action.choices.items():
            if id(sub) in seen:
                seen[id(sub)].names.append(name)
                continue
            options = [o for a in sub._actions for o in a.option_strings]  # noqa: SLF001
            valued = [
                o
                for a in sub._actions  # noqa: SLF001
                if a.option_strings and a.nargs != 0 and not isinstance(a, _FLAGS)
                for o in a.option_strings
            ]
            seen[id(sub)] = _Command([name], sorted(options), sorted(valued))
        commands = list(seen.values())
    return commands


_FLAGS = (
    argparse._StoreTrueAction,  # noqa: SLF001
    argparse._StoreFalseAction,  # noqa: SLF001
    argparse._HelpAction,  # noqa: SLF001
    argparse._VersionAction,  # noqa: SLF001
    argparse._CountAction,  # noqa: SLF001
)


def _words(items: list[str]) -> str:
    return " ".join(shlex.quote(item) for item in items)


def _bash(commands: list[_Command]) -> str:
    names = [name for command in commands for name in command.names]
    valued = sorted({option for command in commands for option in command.valued})
    id_names = [n for c in commands if c.names[0] in ID_COMMANDS for n in c.names]
    cases = "\n".join(
        f"        {'|'.join(command.names)}) opts={shlex.quote(' '.join(command.options))} ;;"
        for command in commands
    )
    return f"""# artmem completion for bash (zsh: through bashcompinit)
_artmem() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} cmd="" skip="" word i opts=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${{COMP_WORDS[i]}}
        if [[ -n $skip ]]; then skip=""; continue; fi
        case " {" ".join(valued)} " in *" $word "*) skip=1; continue ;; esac
        [[ $word == -* ]] && continue
        cmd=$word; break
    done
    if [[ -z $cmd ]]; then
        opts="{" ".join(names)} --config --project --json --help --version"
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi
    case $cmd in
{cases}
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi
    case " {" ".join(id_names)} " in
        *" $cmd "*)
            opts=$(command artmem completion ids "$cur" 2>/dev/null)
            COMPREPLY=($(compgen -W "$opts" -- "$cur"))
            [[ ${{#COMPREPLY[@]}} -gt 0 ]] && return ;;
    esac
    COMPREPLY=($(compgen -f -- "$cur"))
}}
complete -o filenames -F _artmem artmem
"""


def _zsh(commands: list[_Command]) -> str:
    return (
        "# artmem completion for zsh\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + _bash(commands).split("\n", 1)[1]
    )


def _fish(commands: list[_Command]) -> str:
    names = [name for command in commands for name in command.names]
    lines = [
        "# artmem completion for fish",
        "complete -c artmem -f",
        f"complete -c artmem -n __fish_use_subcommand -a {shlex.quote(' '.join(names))}",
        "complete -c artmem -l config -r -F",
        "complete -c artmem -l project -x",
        "complete -c artmem -l json",
    ]
    for command in commands:
        seen = f"__fish_seen_subcommand_from {_words(command.names)}"
        for option in command.options:
            if option.startswith("--") and option not in ("--config", "--project", "--json"):
                takes = " -r" if option in command.valued else ""
                lines.append(f"complete -c artmem -n {shlex.quote(seen)} -l {option[2:]}{takes}")
        if command.names[0] in ID_COMMANDS:
            ids = "(command artmem completion ids (commandline -ct) 2>/dev/null)"
            lines.append(f"complete -c artmem -n {shlex.quote(seen)} -a {shlex.quote(ids)}")
        else:
            lines.append(f"complete -c artmem -n {shlex.quote(seen)} -F")
    return "\n".join(lines) + "\n"


SCRIPTS = {"bash": _bash, "zsh": _zsh, "fish": _fish}
