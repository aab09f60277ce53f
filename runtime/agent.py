"""The agent loop: generate, parse tool calls, run them, append results, repeat.

Each step appends the assistant header, lets the engine generate under the active adapter
(the generated ids stay in the history as generated), parses `<tool_call>` blocks, runs
`load_lora` / `offload_lora` in-process and external tools over MCP, and appends the results
as `tool` turns encoded with `runtime.chat.encode_turns`. Malformed calls, unknown tools and
refused switches become tool errors the model reads. While an external tool runs, the
session prefetches the configuration the policy expects next. The loop ends at a final answer
(a reply without tool calls, once the hard order is complete) or at the step budget.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import anyio

from runtime.chat import (
    ASSISTANT_HEADER,
    IM_END,
    LOAD_LORA,
    OFFLOAD_LORA,
    ParsedReply,
    ToolCall,
    encode,
    encode_turns,
    parse_reply,
)
from runtime.choice import choice_options, chosen_move, rotations
from runtime.engine import Config, GenerationResult
from runtime.episode import Episode, StepRecord
from runtime.lora_tools import INTERNAL_TOOLS, ToolOutcome, lora_tool_schemas
from runtime.mcp_client import McpToolbox
from runtime.policy import SoftPolicy

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentConfig:
    max_steps: int = 16  # generation steps per episode
    max_new_tokens: int = 256  # per step
    system: str | None = None  # None: the chat format's default system prompt
    # Hard policy: the runtime makes each prescribed switch as soon as no adapter is active,
    # without a bare-backbone turn first, and the episode ends once the last phase offloads
    # (its answer is the last adapter's text). Shorter episodes for evaluations.
    runtime_switches: bool = False
    # With runtime_switches: generations one phase may take; then the runtime moves on to the
    # next phase itself (None: no limit), so one phase stuck in a loop of tool calls cannot
    # spend the whole episode's budget.
    max_phase_steps: int | None = None
    # Tokens the model may generate in the whole episode (None: max_steps x max_new_tokens);
    # the last generation gets what is left. A model that rambles every step stops at this
    # budget instead of spending max_steps full generations.
    max_episode_tokens: int | None = None


@dataclass(frozen=True)
class Generated:
    result: GenerationResult
    reply: ParsedReply
    active: Config  # the configuration that generated it


class Agent:
    """Runs episodes on one engine's tokenizer, with optional external MCP tools."""

    def __init__(
        self, tokenizer: Any, toolbox: McpToolbox | None = None, config: AgentConfig | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self.toolbox = toolbox
        self.config = config or AgentConfig()
        self._im_end = encode(tokenizer, IM_END)
        self._header = encode(tokenizer, ASSISTANT_HEADER)
        self._newline = encode(tokenizer, "\n")

    async def run(self, episode: Episode, task: str) -> Episode:
        """Run `task` to a final answer or the step budget; failures end up in the episode."""
        episode.task, episode.status = task, "running"
        episode.events.emit("start", task=task, policy=episode.policy.to_json())
        start = time.perf_counter()
        try:
            await self._loop(episode, task)
            episode.status = "done"
        except anyio.get_cancelled_exc_class():
            episode.status = "cancelled"
            episode.error = episode.cancel_reason or "the runtime stopped"
            raise
        except Exception as exc:
            logger.exception("episode %s failed", episode.id)
            episode.status, episode.error = "failed", failure_cause(exc)
        finally:
            episode.elapsed_s = time.perf_counter() - start
            episode.events.emit(
                "done",
                status=episode.status,
                answer=episode.answer,
                finish_reason=episode.finish_reason,
                error=episode.error,
            )
            episode.events.close()
        return episode

    def tools(self, episode: Episode, order: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The tools the model is shown, load_lora listing the capabilities in `order`
        (default sorted)."""
        external = self.toolbox.schemas() if self.toolbox else []
        return lora_tool_schemas(episode.control.library, order) + external

    async def _loop(self, episode: Episode, task: str) -> None:
        system = [{"role": "system", "content": self.config.system}] if self.config.system else []
        first = [*system, {"role": "user", "content": task}]
        # Under a constrained soft policy, the opening turns once per rotation of the order
        # in which load_lora lists the capabilities: each choice is scored after each (the
        # first is the sorted listing the history holds).
        listings = [
            encode_turns(self.tokenizer, first, self.tools(episode, order))
            for order in (rotations(episode.control.library) if _chooses(episode) else [None])
        ]
        for turn, message in zip(listings[0], first, strict=True):
            self._push(episode, message, turn.ids)
        openings = [[t for turn in turns for t in turn.ids] for turns in listings]
        generated, phase, in_phase = 0, -1, 0
        budget = self.config.max_episode_tokens
        while generated < self.config.max_steps:
            if budget is not None and episode.decoded >= budget:
                episode.finish_reason = "max_tokens"
                return
            if self._runtime_turn(episode, phase, in_phase):
                forced = episode.policy.forced_next(episode.control.loaded)
                if forced is None:
                    episode.answer, episode.finish_reason = self._last_text(episode), "answer"
                    return
                await self._force(episode, forced)
                continue
            if _chooses(episode) and episode.session.active is None:
                gen = await self._choose(episode, openings)
                generated += 1
                if gen.reply.calls:
                    await self._run_calls(episode, gen)
                    continue
                self._record(episode, gen, switch_s=0.0)  # the closing reply: answer
                episode.answer = self._last_text(episode, skip=1) or gen.reply.content
                episode.finish_reason = "answer"
                return
            loaded = len(episode.control.loaded)
            phase, in_phase = loaded, (in_phase + 1 if loaded == phase else 1)
            gen = await self._generate(episode)
            generated += 1
            if gen.reply.calls or gen.reply.errors:
                await self._run_calls(episode, gen)
                continue
            self._record(episode, gen, switch_s=0.0)
            if _chooses(episode):  # a phase ended without offloading: the runtime offloads
                await self._force(episode, None)
                continue
            forced = episode.policy.forced_next(episode.control.loaded)
            if forced is None:
                episode.answer, episode.finish_reason = gen.reply.content, "answer"
                return
            await self._force(episode, forced)
        episode.finish_reason = "max_steps"

    def _runtime_turn(self, episode: Episode, phase: int, in_phase: int) -> bool:
        """With `runtime_switches`, under a hard policy, between phases (or once the phase
        has used `max_phase_steps` generations): the runtime acts."""
        config = self.config
        if not config.runtime_switches or episode.policy.kind != "hard":
            return False
        if episode.session.active is None:
            return True
        limit = config.max_phase_steps
        return limit is not None and phase == len(episode.control.loaded) and in_phase >= limit

    def _max_new_tokens(self, episode: Episode) -> int:
        budget = self.config.max_episode_tokens
        if budget is None:
            return self.config.max_new_tokens
        return min(self.config.max_new_tokens, budget - episode.decoded)  # > 0: `_loop` checked

    @staticmethod
    def _last_text(episode: Episode, skip: int = 0) -> str:
        """The last non-empty assistant text, passing over the last `skip` messages."""
        messages = episode.messages[: len(episode.messages) - skip]
        said = (m for m in reversed(messages) if m.get("role") == "assistant")
        return next((t for m in said if (t := m.get("content") or "").strip()), "")

    def _push(self, episode: Episode, message: dict[str, Any], ids: tuple[int, ...]) -> None:
        episode.messages.append(message)
        episode.session.append(ids)

    def _append_turn(self, episode: Episode, message: dict[str, Any]) -> None:
        """A turn the model did not generate, tokenised as the chat format renders it."""
        placeholder = {"role": "user", "content": ""}
        turn = encode_turns(self.tokenizer, [placeholder, message], None)[1]
        self._push(episode, message, turn.ids)

    async def _generate(self, episode: Episode) -> Generated:
        session, events = episode.session, episode.events
        session.append(self._header)
        active = session.active

        def on_token(token: int) -> None:
            events.emit("token", id=token, text=self.tokenizer.decode([token]))

        result = await anyio.to_thread.run_sync(
            session.generate, self._max_new_tokens(episode), self._im_end, on_token
        )
        return self._reply(episode, result, active)

    async def _choose(self, episode: Episode, openings: list[list[int]]) -> Generated:
        """Constrained soft policy, no adapter active: the engine takes the valid move of
        highest log-probability averaged over the listings (`runtime.choice`): the history
        with its opening turns rendered under each rotation of load_lora's listing."""
        session, events, policy = episode.session, episode.events, episode.policy
        assert isinstance(policy, SoftPolicy)
        options = choice_options(self.tokenizer, session.library, policy.closing)
        session.append(self._header)
        since = list(session.history[len(openings[0]) :])
        contexts = [opening + since for opening in openings]

        def on_token(token: int) -> None:
            events.emit("token", id=token, text=self.tokenizer.decode([token]))

        result = await anyio.to_thread.run_sync(
            session.choose, [o.ids for o in options], contexts, on_token
        )
        move = chosen_move(options, result.token_ids).move
        events.emit("choice", move=move, options=[o.move for o in options])
        return self._reply(episode, result, None)

    def _reply(self, episode: Episode, result: GenerationResult, active: Config) -> Generated:
        """Close the generated turn, parse it, record the assistant message."""
        session, events = episode.session, episode.events
        if list(result.token_ids[-len(self._im_end) :]) != self._im_end:
            session.append(self._im_end)  # cut off by the token budget: close the turn
        session.append(self._newline)
        reply = parse_reply(self.tokenizer.decode(list(result.token_ids)))
        calls = [c.to_message_call() for c in reply.calls]
        episode.messages.append(
            {"role": "assistant", "content": reply.content, "tool_calls": calls}
        )
        events.emit("assistant", content=reply.content, calls=calls, errors=list(reply.errors))
        return Generated(result, reply, active)

    async def _run_calls(self, episode: Episode, gen: Generated) -> None:
        switch_s = 0.0
        for error in gen.reply.errors:
            self._tool_result(episode, "invalid_tool_call", ToolOutcome.error(error))
        for call in gen.reply.calls:
            outcome = await self._call(episode, call)
            if outcome.switch is not None:
                switch_s += outcome.switch.seconds
            self._tool_result(episode, call.name, outcome)
        self._record(episode, gen, switch_s)

    async def _call(self, episode: Episode, call: ToolCall) -> ToolOutcome:
        episode.events.emit("tool_call", name=call.name, arguments=call.arguments)
        if call.name in INTERNAL_TOOLS:
            before = episode.session.active
            outcome = await anyio.to_thread.run_sync(
                episode.control.call, call.name, call.arguments
            )
            if outcome.switch is not None:
                self._switched(episode, before, outcome, forced=False)
            return outcome
        if self.toolbox is not None and call.name in self.toolbox:
            return await self._external(episode, call)
        names = [t["function"]["name"] for t in self.tools(episode)]
        return ToolOutcome.error(f"unknown tool {call.name!r}; available: {', '.join(names)}")

    async def _external(self, episode: Episode, call: ToolCall) -> ToolOutcome:
        """Call an external tool; meanwhile prefetch the configuration expected next."""
        assert self.toolbox is not None
        session, control = episode.session, episode.control
        target = episode.policy.next_config(session.active, control.loaded)
        async with anyio.create_task_group() as tg:
            if target != session.active:
                episode.events.emit("prefetch", config=target)
                tg.start_soon(anyio.to_thread.run_sync, session.prefetch, target)
            outcome = await self.toolbox.call(call.name, call.arguments)
        return outcome

    def _tool_result(self, episode: Episode, name: str, outcome: ToolOutcome) -> None:
        episode.events.emit(
            "tool_result", name=name, content=outcome.content, is_error=outcome.is_error
        )
        self._append_turn(episode, {"role": "tool", "name": name, "content": outcome.content})

    def _switched(self, episode: Episode, before: Any, outcome: ToolOutcome, forced: bool) -> None:
        assert outcome.switch is not None
        episode.events.emit(
            "switch",
            from_config=before,
            to_config=outcome.switch.to_config,
            seconds=outcome.switch.seconds,
            forced=forced,
        )

    async def _force(self, episode: Episode, capability: str | None) -> None:
        """Hard policy: the model stopped early, so the runtime makes the next switch itself
        (None: only offload the active adapter, a constrained soft policy's phase end)."""
        session = episode.session
        calls = [ToolCall(OFFLOAD_LORA)] if session.active is not None else []
        if capability is not None:
            calls.append(ToolCall(LOAD_LORA, {"capability": capability}))
        message = {
            "role": "assistant",
            "content": "",
            "tool_calls": [c.to_message_call() for c in calls],
        }
        self._append_turn(episode, message)
        switch_s = 0.0
        for call in calls:
            before = session.active
            episode.events.emit("tool_call", name=call.name, arguments=call.arguments, forced=True)
            outcome = await anyio.to_thread.run_sync(
                episode.control.call, call.name, call.arguments
            )
            if outcome.is_error or outcome.switch is None:
                raise RuntimeError(f"forced {call.name} failed: {outcome.message}")
            switch_s += outcome.switch.seconds
            self._switched(episode, before, outcome, forced=True)
            self._tool_result(episode, call.name, outcome)
        record = StepRecord(
            step=len(episode.steps),
            active=session.active,
            prefilled=0,
            decoded=0,
            cache_hit=0,
            prefill_s=0.0,
            decode_s=0.0,
            rebuild_s=0.0,
            switch_s=switch_s,
            tool_calls=tuple(c.name for c in calls),
            forced=True,
        )
        self._add_step(episode, record)

    def _record(self, episode: Episode, gen: Generated, switch_s: float) -> None:
        result, reply = gen.result, gen.reply
        record = StepRecord(
            step=len(episode.steps),
            active=gen.active,
            prefilled=result.prefilled,
            decoded=result.decoded,
            cache_hit=result.cache_hit,
            prefill_s=result.prefill_s,
            decode_s=result.decode_s,
            rebuild_s=result.rebuild_s,
            switch_s=switch_s,
            tool_calls=tuple(c.name for c in reply.calls),
            finish_reason=result.finish_reason,
        )
        self._add_step(episode, record)

    def _add_step(self, episode: Episode, record: StepRecord) -> None:
        episode.steps.append(record)
        episode.events.emit("step", **asdict(record))


def _chooses(episode: Episode) -> bool:
    """Whether the episode's policy makes its choices under a constraint."""
    policy = episode.policy
    return isinstance(policy, SoftPolicy) and policy.constrained


def failure_cause(exc: BaseException) -> str:
    """The one line an episode that failed reports, `Type: message` of the cause: taken out
    of any exception group (a task group's "unhandled errors in a TaskGroup" says nothing)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
