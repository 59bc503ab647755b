"""OpenEnv's own example environments (github.com/meta-pytorch/OpenEnv, its `envs/` folder), each
served unchanged by gym-metrics, run multi-turn through collect with the turns and rewards
OpenEnv's own client gets from OpenEnv's own server for the same actions.

Their code is not on PyPI and is not copied here: the tests import it at run time from a
checkout of OpenEnv's repository that GYM_METRICS_OPENENV_REPO names (the folder holding
`envs/`), and skip without one (CI has none: its machines reach no repository host). An
example whose own dependencies are not installed skips, naming the module.

    GYM_METRICS_OPENENV_REPO=/path/to/OpenEnv .venv311-oe/bin/python -m pytest -q tests/openenv

Each example's policy is scripted for that environment (a fixed list of turns, or one that
reads the observations, for the games whose positions it must follow): the model's turns as
JSON text, fenced JSON, `step` tool calls, an Action's one text field or an MCP environment's
tools, with actions that do not fit and actions the environment itself penalises, and an end
(a win, a loss) where the game has one. OpenEnv's client then plays the valid actions of those
same turns against OpenEnv's server for the same class, and the episode must be the same.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from _openenv_reference import Plan, Turn, assert_plays_as_client, client_episode, collect, need_openenv, openenv_server, task, turns_policy
from gym_metrics.testing import PolicyAnswer

REPO_VARIABLE = "GYM_METRICS_OPENENV_REPO"
PACKAGES = ("echo_env", "maze_env", "connect4_env", "grid_world_env", "wildfire_env", "reasoning_gym_env", "coding_env", "chess_env", "textarena_env")


@pytest.fixture
def repo(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The OpenEnv checkout, its root and its `envs/` folder on sys.path (the examples import
    themselves as `maze_env.models`, `maze_env.server...`); their modules forgotten after."""
    given = os.environ.get(REPO_VARIABLE)
    if not given:
        unavailable(f"{REPO_VARIABLE} names no checkout of OpenEnv's repository (github.com/meta-pytorch/OpenEnv: its envs/ are not on PyPI)")
    root = Path(given)
    assert (root / "envs").is_dir(), f"{REPO_VARIABLE}={given} has no envs/ folder: name the root of OpenEnv's repository"
    need_openenv()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.syspath_prepend(str(root / "envs"))
    yield root
    for name in [m for m in sys.modules if m.split(".")[0] in PACKAGES]:
        del sys.modules[name]


def unavailable(reason: str) -> NoReturn:
    """Skip, under CI=true too: what the test needs is not here and no install from PyPI brings it."""
    pytest.skip(reason)


def need(module: str, install: str) -> None:
    """Skip unless an example's own dependency is installed (the example's, not gym-metrics')."""
    pytest.importorskip(module, reason=f"{module} is not installed: the example's own dependency (pip install {install})")


def load(path: str) -> Any:
    """`package.module:Name` from the checkout."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


# --- turns --------------------------------------------------------------------------------------


def say(action: dict[str, Any]) -> Turn:
    """An action as the turn's JSON text."""
    return Turn(json.dumps(action), (action,))


def fenced(action: dict[str, Any]) -> Turn:
    """An action as a ```json block."""
    return Turn(f"```json\n{json.dumps(action)}\n```", (action,))


def call(*actions: dict[str, Any]) -> Turn:
    """Actions as calls of the `step` tool, in one turn."""
    return Turn(PolicyAnswer(tool_calls=[{"name": "step", "arguments": a} for a in actions]), actions)


def refused(answer: str | dict[str, Any]) -> Turn:
    """A turn that is no action: text that is not one, or fields that do not fit the Action."""
    return Turn(answer if isinstance(answer, str) else json.dumps(answer))


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    """An MCP environment's tool call, as OpenEnv's CallToolAction."""
    return {"type": "call_tool", "tool_name": name, "arguments": arguments}


def tools(*calls: dict[str, Any], known: bool = True) -> Turn:
    """One turn calling an MCP environment's tools (`known=False`: one it does not have, refused)."""
    answer = PolicyAnswer(tool_calls=[{"name": c["tool_name"], "arguments": c["arguments"]} for c in calls])
    return Turn(answer, tuple(calls) if known else ())


def styled(actions: Sequence[dict[str, Any]]) -> list[Turn]:
    """Actions as turns, each written another way in turn (JSON, a fence, a tool call)."""
    return [(say, fenced, call)[i % 3](a) for i, a in enumerate(actions)]


PASS = Turn(PolicyAnswer(tool_calls=[{"name": "pass", "arguments": {}}]))
"""A turn that is no action in any environment: a call of a tool none has."""


def last_observation(conversation: str) -> dict[str, Any]:
    """The newest observation the model read (a JSON line), for a policy that follows the game."""
    for line in reversed(conversation.split("\n")):
        if line.startswith("{"):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    raise AssertionError(f"no observation in {conversation[:200]!r}")


# --- the run ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """One of OpenEnv's examples: its classes (`module:Name` under envs/), whether its Action
    must be named (its `step` is annotated with OpenEnv's base Action, so, as its app.py does,
    the Action is given), and how many sessions OpenEnv's server may hold (1 for a class
    without SUPPORTS_CONCURRENT_SESSIONS: create_app refuses more)."""

    environment: str
    action: str
    observation: str
    name_action: bool = False
    sessions: int = 8
    mcp: bool = False


async def play(tmp_path: Path, example: Example, tasks: dict[str, tuple[dict[str, Any], Plan]], max_steps: int,
               drawn: Sequence[str] = ()) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Collect every task through gym-metrics, replay each one's valid actions with OpenEnv's
    client against OpenEnv's server, and check that each episode is the client's; the rows by
    prompt. A plan that runs out passes until `max_steps`. `drawn`: state fields the
    environment draws per instance (assert_plays_as_client)."""
    from gym_metrics.ecosystems.openenv import openenv_server as served

    env, action, observation = load(example.environment), load(example.action), load(example.observation)
    if not example.mcp and not example.name_action:
        assert served(env).action is action  # read off the class, as `gym-metrics serve module:Class` does
    played: dict[str, list[Any]] = {}
    rows = [task(i, prompt, reset) for i, (prompt, (reset, _)) in enumerate(tasks.items())]
    plans = {prompt: plan if callable(plan) else [*plan, *[PASS] * (max_steps - len(plan))] for prompt, (_, plan) in tasks.items()}
    got = await collect(tmp_path, served(env, action if example.name_action else None), rows, turns_policy(plans, played), max_steps=max_steps)
    assert sorted(got) == list(range(len(tasks)))
    with openenv_server(env, action, observation, sessions=example.sessions) as url:
        for index, (prompt, (reset, _)) in enumerate(tasks.items()):
            turns = played[prompt]
            assert len(turns) <= max_steps
            valid = [a for turn in turns for a in turn.actions]
            ref = await client_episode(url, reset, valid, list_tools=example.mcp)
            assert_plays_as_client(got[index], ref, (prompt, [t.answer for t in turns]), drawn)
    return {prompt: got[index] for index, prompt in enumerate(tasks)}


# --- the examples -------------------------------------------------------------------------------


async def test_echo_env_an_mcp_environment(tmp_path: Path, repo: Path) -> None:
    """echo_env: a pure MCP environment (FastMCP tools echo_message, echo_with_length); a call
    with arguments that do not fit is stepped (the tool's error is the observation)."""
    need("fastmcp", "fastmcp")
    example = Example("echo_env.server.echo_environment:EchoEnvironment", "openenv.core.env_server.mcp_types:CallToolAction",
                      "openenv.core.env_server.mcp_types:CallToolObservation", mcp=True)  # fmt: skip
    plan = [tools(tool("echo_message", message="hello")),
            tools(tool("echo_with_length", message="héllo wörld"), tool("echo_message", message="twice")),
            refused("I would rather talk."),
            tools(tool("shout", message="HEY"), known=False),
            tools(tool("echo_message")),
            tools(tool("echo_with_length", message="")),]  # fmt: skip
    rows = await play(tmp_path, example, {"Echo things.": ({"episode_id": "echo-0"}, plan)}, max_steps=len(plan))
    assert rows["Echo things."]["truncated"] is True  # echo never ends: --max-steps bounds it


async def test_maze_env_walked_to_the_exit(tmp_path: Path, repo: Path) -> None:
    """maze_env: moves 0-3 (up, down, left, right) on an 8x8 maze; a wall or the edge costs
    -0.75, a revisit -0.25, a move -0.05, the exit +10 and the end."""
    need("numpy", "numpy")
    example = Example("maze_env.server.maze_env_environment:MazeEnvironment", "maze_env.models:MazeAction", "maze_env.models:MazeObservation")
    up, down, left, right = ({"action": a} for a in range(4))
    # the way out of its default maze, with a bump into the top edge and a step back and forth
    way = [right, up, right, right, right, left, right, down, down, right, right, down, right, down, down, down, down]
    escape = styled(way[:5]) + [refused({"action": "left"}), refused("go right")] + styled(way[5:])
    wander = [say(down), call(right, left), say(left), fenced(right)]
    rows = await play(tmp_path, example, {"Find the exit.": ({"seed": 7}, escape), "Wander.": ({"seed": 8}, wander)},
                      max_steps=len(escape), drawn=["episode_id"])  # fmt: skip
    assert rows["Find the exit."]["terminated"] is True and rows["Find the exit."]["info"]["state"]["status"] == "win"
    assert rows["Wander."]["truncated"] is True


async def test_connect4_env_won_lost_and_overfilled(tmp_path: Path, repo: Path) -> None:
    """connect4_env: one environment plays both colours; four in a line wins (+1, done), a column
    off the board or full loses (-1, done). Without concurrent sessions: one at a time."""
    need("numpy", "numpy")
    example = Example("connect4_env.server.connect4_environment:Connect4Environment", "connect4_env.models:Connect4Action",
                      "connect4_env.models:Connect4Observation", sessions=1)  # fmt: skip
    column = [{"column": c} for c in range(7)]
    four_in_a_column = styled([column[0], column[1], column[0], column[1]]) + [refused({"column": "left"})] + styled([column[0], column[1], column[0]])
    tasks = {"Win.": ({}, four_in_a_column), "Play off the board.": ({}, [say(column[3]), say({"column": 9})]),
             "Fill a column.": ({"seed": 1}, [call(column[3], column[3]), *styled([column[3]] * 5)])}  # fmt: skip
    # (its reset takes no arguments: the seed is dropped, as OpenEnv's server drops it)
    rows = await play(tmp_path, example, tasks, max_steps=len(four_in_a_column), drawn=["episode_id"])
    assert all(row["terminated"] for row in rows.values())


async def test_grid_world_env_reached_the_goal(tmp_path: Path, repo: Path) -> None:
    """grid_world_env: UP/DOWN/LEFT/RIGHT on a 5x5 grid from [0, 0] (a move off the edge stays
    put), -0.1 a step, +1 and the end at [4, 4]; a direction it does not know does not fit."""
    example = Example("grid_world_env.server.grid_world_environment:GridWorldEnvironment", "grid_world_env.models:GridWorldAction",
                      "grid_world_env.models:GridWorldObservation", sessions=1)  # fmt: skip
    up, down, left, right = ({"action": a} for a in ("UP", "DOWN", "LEFT", "RIGHT"))
    goal = [*styled([up, left]), refused({"action": "JUMP"}), call(down, down), *styled([down, down, right, right, right]), say(right)]
    stroll = [say(right), call(right, up), fenced(down)]
    rows = await play(tmp_path, example, {"Reach the goal.": ({}, goal), "Stroll.": ({}, stroll)}, max_steps=len(goal), drawn=["episode_id"])
    assert rows["Reach the goal."]["terminated"] is True and rows["Stroll."]["truncated"] is True


def firefighter(hesitate: bool) -> Plan:
    """A wildfire policy that reads the grid (its turns text, so each observation is the next
    user message): water on a burning cell while water lasts, else a firebreak beside one;
    `hesitate`: first a refused turn, water out of bounds (-0.05), an action the environment
    does not know (-0.05) and a wait, while the fire spreads."""

    def turn(conversation: str, number: int) -> Turn:
        if hesitate and number < 4:  # (the last of them text: the observation after it is the next user message)
            return [refused({"action": "water", "x": "the middle"}), call({"action": "water", "x": 99, "y": 0}),
                    fenced({"action": "extinguish"}), say({"action": "wait"})][number]  # fmt: skip
        seen = last_observation(conversation)
        width, grid = seen["width"], seen["grid"]
        burning = [i for i, cell in enumerate(grid) if cell == 2]
        if not burning:
            return say({"action": "wait"})
        x, y = burning[0] % width, burning[0] // width
        if seen["remaining_water"] > 0:
            return say({"action": "water", "x": x, "y": y})
        beside = [(x + dx, y + dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if 0 <= x + dx < width and 0 <= y + dy < seen["height"]]
        fuel = [(bx, by) for bx, by in beside if grid[by * width + bx] == 1]
        return fenced({"action": "break", "x": fuel[0][0], "y": fuel[0][1]} if fuel else {"action": "wait"})

    return turn


async def test_wildfire_env_fire_contained(tmp_path: Path, repo: Path) -> None:
    """wildfire_env: water, firebreaks and waiting on a burning 32x32 grid; each instance draws
    its wind and fires from a Random seeded 3407, so both servers start from the same fire; the
    episode ends when nothing burns (a containment bonus)."""
    example = Example("wildfire_env.server.wildfire_environment:WildfireEnvironment", "wildfire_env.models:WildfireAction",
                      "wildfire_env.models:WildfireObservation", sessions=1)  # fmt: skip
    tasks = {"Put the fire out.": ({}, firefighter(hesitate=False)), "Think first, then fight the fire.": ({}, firefighter(hesitate=True))}
    rows = await play(tmp_path, example, tasks, max_steps=12, drawn=["episode_id"])
    assert rows["Put the fire out."]["terminated"] is True


async def test_reasoning_gym_env_answers_scored(tmp_path: Path, repo: Path) -> None:
    """reasoning_gym_env: one question per episode from a reasoning-gym dataset the reset names
    (seed, size, config or a composite's specs); the answer (the Action's one text field: the
    turn's text, or JSON) is scored and ends the episode. A right answer comes from the same
    dataset built here, as a policy that knows it would answer."""
    need("reasoning_gym", "reasoning-gym")
    import reasoning_gym

    example = Example("reasoning_gym_env.server.reasoning_gym_environment:ReasoningGymEnvironment", "reasoning_gym_env.models:ReasoningGymAction",
                      "reasoning_gym_env.models:ReasoningGymObservation")  # fmt: skip
    legs = {"dataset_name": "leg_counting", "dataset_config": {"min_animals": 2, "max_animals": 4}, "seed": 7, "size": 3}
    mixed = {"dataset_name": "composite", "seed": 3, "size": 4,
             "dataset_specs": [{"name": "basic_arithmetic", "weight": 1}, {"name": "leg_counting", "weight": 1, "config": {"max_animals": 3}}]}  # fmt: skip
    right = reasoning_gym.create_dataset("leg_counting", size=3, seed=7, min_animals=2, max_animals=4)[0]["answer"]
    misnamed = Turn(PolicyAnswer(tool_calls=[{"name": "answer", "arguments": {"answer": "4"}}]))  # no such tool: refused
    tasks = {"Count the legs.": ({**legs, "episode_id": "rg-0"}, [Turn(right, ({"answer": right},))]),
             "Count the legs, wrongly.": ({**legs, "episode_id": "rg-1"}, [fenced({"answer": "-1"})]),
             "Answer a mixed question.": ({**mixed, "episode_id": "rg-2"}, [call({"answer": "7"})]),
             "Answer the default question.": ({"episode_id": "rg-3"}, [misnamed, Turn("  many legs  ", ({"answer": "  many legs  "},))])}  # fmt: skip
    rows = await play(tmp_path, example, tasks, max_steps=2)
    assert rows["Count the legs."]["reward"] == 1.0 and all(row["terminated"] for row in rows.values())


async def test_coding_env_runs_the_turns_code(tmp_path: Path, repo: Path) -> None:
    """coding_env: the turn's text is the code (CodeAction's one field), run by smolagents'
    LocalPythonExecutor with its variables kept between steps; rewards from its transforms
    (+0.1 concise, -0.2 a syntax error, -1 a dangerous pattern). Its step is annotated with
    OpenEnv's base Action, so the Action is named, as its app.py names it."""
    need("smolagents", "smolagents")
    example = Example("coding_env.server.python_codeact_env:PythonCodeActEnv", "coding_env.models:CodeAction", "coding_env.models:CodeObservation",
                      name_action=True, sessions=1)  # fmt: skip

    def code(text: str) -> Turn:
        return Turn(text, ({"code": text},))

    plan = [code("x = 6 * 7\nprint(x)"), code("print(x + 1)"), say({"code": "squares = [i * i for i in range(4)]\nsquares"}), code("1 / 0"),
            code("def broken(:"), call({"code": "import os\nprint(os.getcwd())"})]  # fmt: skip
    rows = await play(tmp_path, example, {"Compute.": ({}, plan)}, max_steps=len(plan), drawn=["episode_id"])
    assert rows["Compute."]["truncated"] is True


def chess_player(conversation: str, number: int) -> Turn:
    """A chess policy that reads the position: mates when it can, else plays a legal move (the
    first in UCI order), with a move that is no UCI and an illegal one (-0.1 each) in between."""
    import chess

    if number in (1, 2):
        return [say({"move": "castle kingside"}), fenced({"move": "e2e5"})][number - 1]
    board = chess.Board(last_observation(conversation)["fen"])
    moves = sorted(board.legal_moves, key=chess.Move.uci)
    if not moves:  # (a game over before it starts: gym-metrics sends nothing, OpenEnv's client stops)
        return say({"move": "resign"})
    mates = [m for m in moves if board.gives_check(m) and _mates(board, m)]
    return call({"move": (mates or moves)[0].uci()})


def _mates(board: Any, move: Any) -> bool:
    board.push(move)
    try:
        return bool(board.is_checkmate())
    finally:
        board.pop()


async def test_chess_env_against_moonfish(tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """chess_env: UCI moves against the moonfish engine (depth 2); -0.1 for a move that is not
    one or not legal, +1 for a mate; a position already mated is done at reset (the episode
    ends at its first turn, nothing sent). Two draws made the same for both servers: the
    agent's colour (hash of a uuid4 episode id: the test gives the environment one id, one that
    makes it white) and moonfish's move order (random.shuffle on the global random: made the
    sorted order)."""
    need("chess", "chess")
    need("moonfish", "moonfish")
    from moonfish import move_ordering

    module = importlib.import_module("chess_env.server.chess_environment")
    white = next(str(u) for u in (uuid.UUID(int=k) for k in range(64)) if hash(str(u)) % 2 == 0)
    monkeypatch.setattr(module, "uuid", _FixedIds(white))
    monkeypatch.setattr(move_ordering, "random", _Sorted())
    example = Example("chess_env.server.chess_environment:ChessEnvironment", "chess_env.models:ChessAction", "chess_env.models:ChessObservation", sessions=1)
    scholars = "r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 2 3"  # white mates in one
    fools = "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3"  # white is mated
    tasks = {"Open the game.": ({}, chess_player), "Mate.": ({"fen": scholars}, chess_player), "Play on.": ({"fen": fools}, chess_player)}
    rows = await play(tmp_path, example, tasks, max_steps=4)
    assert rows["Mate."]["terminated"] is True and rows["Mate."]["reward"] == 1.0
    assert rows["Play on."]["terminated"] is True and rows["Play on."]["info"]["openenv"] == []


class _FixedIds:
    """Stands for chess_environment's `uuid` module: every episode id is the one given."""

    def __init__(self, value: str) -> None:
        self.value = value

    def uuid4(self) -> str:
        return self.value


class _Sorted:
    """Stands for moonfish.move_ordering's `random`: a shuffle that sorts (in UCI order)."""

    def shuffle(self, moves: list[Any]) -> None:
        moves.sort(key=lambda m: m.uci())


async def test_textarena_env(tmp_path: Path, repo: Path) -> None:
    """textarena_env: its TextArenaEnvironment() plays Wordle-v0, which needs NLTK's `words`
    corpus: NLTK downloads it from its own data server at run time (not PyPI), so without it
    already on the machine the example cannot run."""
    need("textarena", "textarena")
    need("nltk", "nltk")
    import nltk

    try:
        nltk.data.find("corpora/words")
    except LookupError:
        unavailable("NLTK's `words` corpus is not on this machine (TextArena's Wordle-v0 needs it; nltk downloads it at run time, not from PyPI)")
    # With the corpus, Wordle's secret word is still a draw of the global random (the reset
    # ignores the seed OpenEnv passes on), which no two servers share: no game to compare.
    unavailable("TextArena's Wordle-v0 draws its secret word from the unseeded global random: no two servers play the same game")
