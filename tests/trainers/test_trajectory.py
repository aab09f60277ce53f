"""The trajectory format: clear errors with line and field, deterministic generator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trainer_helpers import assistant, call, phase, tool, trajectory, user

from trainers.errors import TrajectoryError
from trainers.tasks import generate
from trainers.trajectory import parse_trajectory, read_trajectories, write_trajectories

GOOD = trajectory("ok", user("Go"), *phase("plan", assistant("Plan.")))


def _bad(*messages: dict) -> dict:
    return trajectory("bad", *messages)


@pytest.mark.parametrize(
    ("obj", "field", "problem"),
    [
        ({"messages": []}, "id", "non-empty string"),
        ({"id": "x", "messages": []}, "messages", "non-empty list"),
        ({"id": "x", "messages": [user("a")], "extra": 1}, "", "unknown keys"),
        (_bad({"role": "bot", "content": "x"}), "messages[0].role", "unknown role"),
        (
            _bad(user("a"), {"role": "system", "content": "s"}),
            "messages[1].role",
            "only come first",
        ),
        (
            _bad(user("a"), {"role": "assistant", "content": ""}),
            "messages[1]",
            "content or tool_calls",
        ),
        (_bad({"role": "user", "content": 3}), "messages[0].content", "must be a string"),
        (
            _bad(assistant("", call("search")), {"role": "tool", "content": "r"}),
            "messages[1].name",
            "name",
        ),
        (
            _bad(assistant("", call("search")), tool("other")),
            "messages[1].name",
            "pending call is 'search'",
        ),
        (_bad(assistant("", call("search")), user("x")), "messages[1]", "no tool result"),
        (_bad(assistant("", call("search"))), "messages", "never answered"),
        (_bad(tool("search")), "messages[0]", "answers no pending call"),
        (
            _bad(
                assistant("", call("load_lora", capability="a"), call("search")), tool("load_lora")
            ),
            "messages[0].tool_calls",
            "only tool call",
        ),
        (
            _bad(assistant("", call("load_lora")), tool("load_lora")),
            "messages[0].tool_calls[0].function.arguments.capability",
            "non-empty string",
        ),
        (
            _bad(
                *phase("a")[:2],
                assistant("", call("load_lora", capability="b")),
                tool("load_lora"),
            ),
            "messages[2]",
            "offload it first",
        ),
        (
            _bad(assistant("", call("offload_lora")), tool("offload_lora")),
            "messages[0]",
            "no adapter",
        ),
        (
            _bad(
                {
                    "role": "assistant",
                    "tool_calls": [{"function": {"name": "s", "arguments": "{x"}}],
                }
            ),
            "messages[0].tool_calls[0].function.arguments",
            "not valid JSON",
        ),
        (
            _bad({"role": "assistant", "tool_calls": [{"type": "f"}]}),
            "messages[0].tool_calls[0]",
            "function",
        ),
        ({"id": "x", "messages": [user("a")], "tools": [{"name": "x"}]}, "tools[0]", "function"),
    ],
)
def test_invalid_trajectories_name_the_field(obj: dict, field: str, problem: str) -> None:
    with pytest.raises(TrajectoryError) as info:
        parse_trajectory(obj)
    assert info.value.field == field
    assert problem in info.value.problem


def test_file_errors_carry_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    bad = _bad(user("a"), tool("search"))
    path.write_text(json.dumps(GOOD) + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(TrajectoryError) as info:
        read_trajectories(path)
    assert (info.value.line, info.value.trajectory, info.value.field) == (3, "bad", "messages[1]")
    assert str(info.value).startswith(f"{path}:3: trajectory 'bad': messages[1]: ")
    path.write_text(json.dumps(GOOD) + "\n{oops\n")
    with pytest.raises(TrajectoryError, match=r":2: not valid JSON"):
        read_trajectories(path)
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n")
    with pytest.raises(
        TrajectoryError, match=r":2: trajectory 'ok': id: duplicate id \(first on line 1\)"
    ):
        read_trajectories(path)


def test_arguments_as_json_string_are_accepted() -> None:
    obj = _bad(
        {"role": "assistant", "tool_calls": [{"function": {"name": "s", "arguments": '{"q": 1}'}}]},
        tool("s"),
    )
    parsed = parse_trajectory(obj)
    assert parsed.messages[0]["tool_calls"][0]["function"]["arguments"] == {"q": 1}


def test_phases_are_recorded() -> None:
    t = parse_trajectory(
        trajectory("t", user("Go"), *phase("plan"), *phase("write", assistant("W"))[:3])
    )
    assert [(p.capability, p.load, p.start, p.offload, p.end) for p in t.phases] == [
        ("plan", 1, 3, 3, 4),
        ("write", 5, 7, None, 8),
    ]
    assert t.capabilities == ("plan", "write")


def test_generator_is_deterministic_and_round_trips(tmp_path: Path) -> None:
    a = generate(3, seed=5, phases=("plan", "search", "write", "code"))
    b = generate(3, seed=5, phases=("plan", "search", "write", "code"))
    assert a == b
    assert generate(3, seed=6) != generate(3, seed=5)
    assert all(t.capabilities == ("plan", "search", "write", "code") for t in a)
    search_results = [
        m for t in a for m in t.messages if m["role"] == "tool" and m["name"] == "search"
    ]
    assert search_results
    assert all(json.loads(m["content"]) for m in search_results)
    path = write_trajectories(tmp_path / "t.jsonl", a)
    assert read_trajectories(path) == a
    assert path.read_bytes() == write_trajectories(tmp_path / "u.jsonl", b).read_bytes()
    with pytest.raises(ValueError, match="not"):
        generate(1, phases=("dance",))


def _readme_schema() -> dict:
    text = (Path(__file__).parents[2] / "trainers" / "README.md").read_text()
    block = next(b for b in text.split("```json")[1:] if '"$schema"' in b)
    return json.loads(block.split("```")[0])


def test_readme_schema_accepts_generated_and_rejects_malformed() -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(_readme_schema())
    for t in generate(2, seed=1, phases=("plan", "search", "write", "code")):
        validator.validate(t.to_json())
    validator.validate(GOOD)
    for bad in [
        {"messages": [user("a")]},
        _bad({"role": "bot", "content": "x"}),
        _bad({"role": "assistant", "content": None}),
        _bad({"role": "tool", "content": "r"}),
        _bad({"role": "user", "content": "a", "tool_calls": []}),
    ]:
        assert not validator.is_valid(bad), bad
        with pytest.raises(TrajectoryError):
            parse_trajectory(bad)
