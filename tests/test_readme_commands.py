"""Every command README.md shows in a ```bash block runs exactly as written, on a fresh clone.

The README's text is the test's input: each command is extracted from the ```bash blocks and run
literally through ``bash -c`` from the root of a copy of the repository made the way a clone is
(only the files git would give, each with the mode recorded in git's index; the virtualenv and node
packages linked in, as ``scripts/setup.sh`` would leave them). A command that is long or interactive
gets an adaptation below — text fed on stdin, or arguments appended that keep the command's own
start-up (``--help``, pytest's ``--collect-only``) — and nothing else; a command with no adaptation
runs exactly as written. The adaptations themselves are checked: one that matches no README command
fails, so a stale entry cannot hide a changed command.

The other fenced blocks hold templates with placeholders (``<id>``), so they cannot run as written;
for them the program is checked: it exists, is executable on a fresh clone and answers ``--help``,
and no command needs a ``PYTHONPATH`` the README does not give (``python -m scripts.…``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


@dataclass(frozen=True)
class Adaptation:
    """How a long or interactive README command is run (the command's own text is unchanged)."""

    pattern: str  # regex matched against the command (comment removed)
    append: str = ""  # arguments appended after the command
    stdin: str = ""  # what a person would type
    stack: bool = False  # starts the local stack: the `stack` layer
    expect: str = ""  # a text the output must contain
    timeout_s: float = 300


ADAPTATIONS = (
    # The main job, whole (about 35 s alone on this machine): it brings up and stops its own stack.
    Adaptation(r"\./scripts/prova\.sh", stack=True, expect="duplicate debits", timeout_s=900),
    # The chat: pick the first demo customer, say hello, leave.
    Adaptation(r"\./scripts/conversa\.py", stdin="1\noi\n/sair\n", stack=True, expect="Cadência>"),
    Adaptation(r"\./scripts/provocar_laco\.py --arquitetura producao .*", stack=True, expect="real debits"),
    # The test command: its set-up, the import contracts and pytest's collection (the suite itself is
    # what this suite is); `--collect-only` after the README's own arguments. Tens of seconds: with the
    # long ones.
    Adaptation(r"(bash )?\./scripts/test\.sh|bash scripts/test\.sh( .*)?", append="--collect-only -q",
               stack=True, expect="tests collected", timeout_s=600),
    # Deploying needs an AWS account: the CLI parses the README's arguments and prints the command's help.
    Adaptation(r"npx cdk (bootstrap|deploy)( .*)?", append="--help", expect="cdk", timeout_s=180),
)

PLACEHOLDER_BLOCK = re.compile(r"<[^>]+>|…|\[--")


def _strip_comment(command: str) -> str:
    """The command without its trailing ``# comment`` (bash drops it too), for appending arguments."""
    words = shlex.split(command, comments=True)
    for match in re.finditer(r"\s#", command):
        try:
            if shlex.split(command[: match.start()]) == words:  # the `#` is outside quotes
                return command[: match.start()].rstrip()
        except ValueError:
            continue
    return command.rstrip()


def fenced_blocks(text: str) -> list[tuple[str, list[str]]]:
    """(language, lines) of every fenced block."""
    blocks: list[tuple[str, list[str]]] = []
    language: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("```"):
            if language is None:
                language, lines = line[3:].strip(), []
            else:
                blocks.append((language, lines))
                language = None
            continue
        if language is not None:
            lines.append(line)
    return blocks


def commands_of(lines: list[str]) -> list[str]:
    """The block's commands: continuation lines joined, blank and comment-only lines dropped."""
    commands: list[str] = []
    pending = ""
    for line in lines:
        if pending:
            line = pending + " " + line.strip()
            pending = ""
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1].rstrip()
            continue
        if line.strip() and not line.lstrip().startswith("#"):
            commands.append(line.strip())
    if pending:
        commands.append(pending)
    return commands


def bash_commands() -> list[str]:
    return [c for lang, lines in fenced_blocks(README.read_text()) if lang == "bash" for c in commands_of(lines)]


def adaptation_for(command: str) -> Adaptation | None:
    found = [a for a in ADAPTATIONS if re.fullmatch(a.pattern, _strip_comment(command))]
    assert len(found) <= 1, f"{command!r} matches more than one adaptation"
    return found[0] if found else None


def _params() -> list:
    params = []
    for command in bash_commands():
        adaptation = adaptation_for(command)
        marks = [pytest.mark.stack] if adaptation and adaptation.stack else []
        params.append(pytest.param(command, marks=marks, id=command[:60]))
    return params


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files a clone would have (tracked, plus new files not ignored), with git's recorded modes."""
    clone = tmp_path_factory.mktemp("clone") / "repo"
    listed = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    index_modes = {}
    for entry in listed.split(b"\0"):
        if entry:
            meta, path = entry.split(b"\t", 1)
            index_modes[path.decode()] = int(meta.split()[0], 8) & 0o777
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if not source.is_file():
            continue  # deleted in the working tree
        target = clone / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        os.chmod(target, index_modes.get(name, source.stat().st_mode & 0o777))
    for linked in (".venv", "node_modules"):  # what scripts/setup.sh leaves (never re-installed here)
        (clone / linked).symlink_to((ROOT / linked).resolve())
    return clone


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CADENCIA_LOCAL_STACK_DIR", "CADENCIA_TEST_STACK_DIR", "PYTHONPATH", "VIRTUAL_ENV")}
    env["COLUMNS"] = "200"
    return env


def test_the_readme_shows_commands() -> None:
    assert len(bash_commands()) >= 3, bash_commands()


def test_every_adaptation_matches_a_readme_command() -> None:
    commands = [_strip_comment(c) for c in bash_commands()]
    stale = [a.pattern for a in ADAPTATIONS if not any(re.fullmatch(a.pattern, c) for c in commands)]
    assert stale == [], f"adaptations for commands the README no longer shows: {stale}"


@pytest.mark.parametrize("command", _params())
def test_readme_command_runs_as_written(command: str, fresh_clone: Path) -> None:
    adaptation = adaptation_for(command)
    line = f"{_strip_comment(command)} {adaptation.append}" if adaptation and adaptation.append else command
    proc = subprocess.run(["bash", "-c", line], cwd=fresh_clone, env=_environment(),
                          input=adaptation.stdin if adaptation else "", capture_output=True, text=True,
                          timeout=adaptation.timeout_s if adaptation else 300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"`{line}` exited {proc.returncode}:\n{output[-3000:]}"
    if adaptation and adaptation.expect:
        assert adaptation.expect in output, f"`{line}` did not print {adaptation.expect!r}:\n{output[-3000:]}"


def _command_words(command: str) -> list[str]:
    """The command's words after leading ``VAR=value`` assignments."""
    words = shlex.split(command, comments=True)
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words.pop(0)
    return words


def _all_fenced_commands() -> list[str]:
    commands = []
    for language, lines in fenced_blocks(README.read_text()):
        if language in ("", "bash", "sh"):
            for command in commands_of(lines):
                try:
                    _command_words(command)
                except ValueError:
                    continue  # a diagram line, not a command
                commands.append(command)
    return commands


def test_no_readme_command_needs_an_unstated_pythonpath() -> None:
    needing = [c for c in _all_fenced_commands()
               if (w := _command_words(c)) and Path(w[0]).name.startswith("python") and w[1:3][:1] == ["-m"]
               and w[2].startswith("scripts.")]
    assert needing == [], f"commands that only run with PYTHONPATH set (give them an executable): {needing}"


def _programs_in_templates() -> list[str]:
    programs = set()
    for command in _all_fenced_commands():
        words = _command_words(command)
        if words and re.fullmatch(r"(\./)?scripts/[\w./-]+", words[0]):
            programs.add(words[0].removeprefix("./"))
    return sorted(programs)


def test_the_template_blocks_name_programs() -> None:
    assert {"scripts/console", "scripts/atendente"} <= set(_programs_in_templates())


@pytest.mark.parametrize("program", _programs_in_templates())
def test_a_program_the_readme_names_is_executable_on_a_fresh_clone(program: str, fresh_clone: Path) -> None:
    path = fresh_clone / program
    assert path.is_file(), f"{program} does not exist"
    assert os.access(path, os.X_OK), f"{program} is not executable in git's index (git update-index --chmod=+x)"
    assert path.read_bytes().startswith(b"#!"), f"{program} has no shebang: bash would run it as a shell script"
    proc = subprocess.run(["bash", "-c", f"./{program} --help"], cwd=fresh_clone, env=_environment(),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, \
        f"{program} --help exited {proc.returncode}:\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}"


def test_a_chat_started_from_another_directory_finds_its_repository(fresh_clone: Path, tmp_path: Path) -> None:
    """The shebang finds the repository's virtualenv from the script's own path, not from the cwd."""
    proc = subprocess.run([str(fresh_clone / "scripts" / "conversa.py"), "--help"], cwd=tmp_path,
                          env=_environment(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "--numero" in proc.stdout
