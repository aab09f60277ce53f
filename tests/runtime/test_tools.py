"""load_lora / offload_lora semantics on the scripted engine (no model needed)."""

from __future__ import annotations

import json

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from support.engines import ScriptedEngine

from runtime.engine import AdapterSpec
from runtime.errors import (
    AdapterAlreadyActiveError,
    NoActiveAdapterError,
    PolicyViolationError,
    UnknownAdapterError,
)
from runtime.lora_tools import AdapterControl, lora_tool_schemas
from runtime.policy import HardPolicy, SoftPolicy


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine(("plan", "search", "write"))


def control(engine: ScriptedEngine, policy=None) -> AdapterControl:
    return AdapterControl(engine.new_session(), policy or SoftPolicy(), engine.adapters)


def test_load_then_offload_switches_the_session(engine) -> None:
    c = control(engine)
    record = c.load("search")
    assert (record.from_config, record.to_config) == (None, "search")
    assert c.session.active == "search"
    assert c.offload().to_config is None
    assert c.session.active is None
    assert c.loaded == ["search"]
    assert [s.to_config for s in c.switches] == ["search", None]


def test_loading_while_active_asks_to_offload_first(engine) -> None:
    c = control(engine)
    c.load("plan")
    with pytest.raises(AdapterAlreadyActiveError, match="call offload_lora before loading"):
        c.load("write")
    assert c.session.active == "plan"
    outcome = c.call("load_lora", {"capability": "write"})
    assert outcome.is_error
    assert "offload_lora" in outcome.message
    assert c.session.active == "plan"


def test_unknown_capability_lists_the_available_ones(engine) -> None:
    c = control(engine)
    with pytest.raises(UnknownAdapterError) as info:
        c.load("code")
    assert info.value.available == ["plan", "search", "write"]
    message = c.call("load_lora", {"capability": "code"}).message
    assert "plan, search, write" in message
    assert c.session.active is None
    assert c.loaded == []


def test_offload_with_none_active_is_an_error(engine) -> None:
    c = control(engine)
    with pytest.raises(NoActiveAdapterError):
        c.offload()
    outcome = c.call("offload_lora", {})
    assert outcome.is_error
    assert "nothing to offload" in outcome.message
    assert c.switches == []


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("load_lora", {}),
        ("load_lora", {"capability": 3}),
        ("load_lora", {"capability": "plan", "extra": 1}),
        ("offload_lora", {"capability": "plan"}),
        ("rm_rf", {}),
    ],
)
def test_bad_arguments_are_tool_errors_and_change_nothing(engine, name, arguments) -> None:
    c = control(engine)
    outcome = c.call(name, arguments)
    assert outcome.is_error
    assert json.loads(outcome.content)["error"]
    assert c.session.active is None
    assert c.switches == []


def test_success_reports_the_active_adapter(engine) -> None:
    c = control(engine)
    outcome = c.call("load_lora", {"capability": "plan"})
    assert not outcome.is_error
    assert json.loads(outcome.content)["active"] == "plan"
    assert outcome.switch is not None


def test_results_are_the_text_the_trainers_train_on(engine) -> None:
    """The model sees the same load/offload results at serving time as in its training data."""
    from trainers.tasks import generate

    trajectory = generate(1, seed=0)[0]
    trained = {m["content"] for m in trajectory.messages if m.get("name") == "load_lora"}
    trained |= {m["content"] for m in trajectory.messages if m.get("name") == "offload_lora"}
    c = control(engine)
    served = {c.call("load_lora", {"capability": cap}).content for cap in ("plan",)}
    served.add(c.call("offload_lora", {}).content)
    assert served <= trained


def test_hard_policy_refuses_out_of_order_loads(engine) -> None:
    c = control(engine, HardPolicy(("plan", "search", "write")))
    with pytest.raises(PolicyViolationError, match="load 'plan' next"):
        c.load("write")
    c.load("plan")
    c.offload()
    outcome = c.call("load_lora", {"capability": "write"})
    assert outcome.is_error
    assert "'search' next" in outcome.message
    assert c.session.active is None
    c.load("search")
    assert c.loaded == ["plan", "search"]


def test_schemas_carry_the_capability_descriptions() -> None:
    library = {
        "plan": AdapterSpec("plan", "/x", description="Decompose the task."),
        "write": AdapterSpec("write", "/y", description="Write the report."),
    }
    load, offload = lora_tool_schemas(library)
    fn = load["function"]
    assert fn["name"] == "load_lora"
    assert "plan: Decompose the task." in fn["description"]
    assert "write: Write the report." in fn["description"]
    assert fn["parameters"]["properties"]["capability"]["enum"] == ["plan", "write"]
    assert fn["parameters"]["required"] == ["capability"]
    assert offload["function"]["name"] == "offload_lora"
    assert offload["function"]["parameters"]["properties"] == {}


def test_switch_hook_sees_every_switch(engine) -> None:
    seen = []
    c = AdapterControl(engine.new_session(), SoftPolicy(), engine.adapters, on_switch=seen.append)
    c.load("plan")
    c.call("load_lora", {"capability": "write"})  # refused: no switch
    c.offload()
    assert [(s.from_config, s.to_config) for s in seen] == [(None, "plan"), ("plan", None)]


class AdapterControlMachine(RuleBasedStateMachine):
    """Random load/offload sequences against a two-line model of the paper's rules."""

    def __init__(self) -> None:
        super().__init__()
        self.control = control(ScriptedEngine(("plan", "search", "write")))
        self.active: str | None = None
        self.switches = 0

    @rule(name=st.sampled_from(["plan", "search", "write", "code"]))
    def load(self, name: str) -> None:
        outcome = self.control.call("load_lora", {"capability": name})
        allowed = self.active is None and name != "code"
        assert outcome.is_error is not allowed
        if allowed:
            self.active, self.switches = name, self.switches + 1

    @rule()
    def offload(self) -> None:
        outcome = self.control.call("offload_lora", {})
        assert outcome.is_error is (self.active is None)
        if self.active is not None:
            self.active, self.switches = None, self.switches + 1

    @invariant()
    def agrees(self) -> None:
        assert self.control.session.active == self.active
        assert len(self.control.switches) == self.switches


TestAdapterControlMachine = AdapterControlMachine.TestCase
TestAdapterControlMachine.settings = settings(max_examples=30, deadline=None)


def test_an_empty_library_offers_no_adapter_tools() -> None:
    assert lora_tool_schemas({}) == []
