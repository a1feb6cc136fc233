"""The seed systems as pipelines, with their defaults.

=======================  ===================================================================
preset                   behaviour
=======================  ===================================================================
``neurolink``            seed 000: at 80% of available input (window − min(64k, 35%)):
                         prune → dedup → summarize → truncate, until under 80%; then
                         tool-pair repair. NeuroLink's estimator for the call's provider.
``probe``                seed 001: on overflow (the request no longer fits the window),
                         remove the intermediate monologue of older segments. chars/4.
``ai-agent``             seed 002: every tool output over 12,288 bytes is cut behind a
                         handle; over the effective limit (window − 8,192 − ⌊window/4⌋)
                         the guard forces a final turn. max(cl100k, chars/4). A model
                         the window table does not know gets seed 002's 131,072.
``copilot-legacy``       seed 003 as shipped: agent history keeps final answers, 30
                         messages; carried context previewed; only L2+L3+L5 are checked
                         against the 128k autoCompactThreshold — L1 and L4 are never
                         counted, so project context overflows the window. Projects-mode
                         chains check against PROJECT_COMPACT_THRESHOLD instead:
                         ``preset("copilot-legacy", limit_tokens=1_000_000)``.
``copilot-fixed``        seed 003's fix plan (phase 1 and 2.1) over the shipped compactors:
                         L2+L3 blocks are summarized when L1+tools+L2+L3+L5 pass the 128k
                         autoCompactThreshold (the L1-aware trigger, ``threshold − L1``);
                         then, on every request, the history is trimmed to what the other
                         layers leave of 128k less a 4,096 output reserve (oldest turns
                         first, then long answers; the latest turn always stays); memory
                         keeps 100 messages instead of 30. One addition the plan lacks:
                         when the layers but the history leave less than the 4,096
                         reserve (L1 alone too big), project files in L1 are previewed
                         (headings + 100 chars per section) before the history is
                         trimmed — the plan itself never shrinks L1.
``neuron``               seed 004's recommended composite: over 100k tokens, clear all but
                         the 2 latest tool results, then keep the last 10 messages.
``observation-masking``  keep the 10 most recent tool outputs on every request (no trigger),
                         with a sliding window only if the window itself is exceeded.
``claude-code``          Claude Code's auto-compaction as the real logs show it: past the
                         window − 20k − 13k (167k of 200k), the whole conversation becomes one
                         summary, then the 5 most recently modified files are re-attached
                         (5k tokens each, 50k in all) and the plan. o200k tokens;
                         ``ctxlab.calibrate`` fits Claude's tokens better (pass
                         ``estimator=``). `claude_code` (log) uses a log's own summaries
                         where it compacted.
=======================  ===================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxlab.errors import ConfigError
from ctxlab.pipeline import Pipeline, changed, stages_from
from ctxlab.stages.reattach import Reattach, claude_code_summarize
from ctxlab.tokens.windows import AI_AGENT_DEFAULT_CONTEXT_WINDOW

if TYPE_CHECKING:
    from ctxlab.loaders.corpus import Corpus
    from ctxlab.schema import Transcript

COPILOT_AUTO_COMPACT = 128_000  # seed 003: autoCompactThreshold default (tokens)
NEURON_TRIGGER = 100_000  # seed 004: the examples' compaction threshold


@dataclass(frozen=True, slots=True, kw_only=True)
class Preset:
    """A named pipeline factory."""

    name: str
    make: Callable[[], Pipeline]
    source: str


def _neurolink() -> Pipeline:
    # seed 000's contextCompaction limits every tool output (maxToolOutputBytes 51,200,
    # maxToolOutputLines 2,000, tail kept) before it joins the conversation: at every call
    return Pipeline(name="neurolink", always=stages_from(["truncate_tool_output"]),
                    stages=stages_from(["prune", "dedup", "summarize", "truncate"]),
                    post=stages_from(["repair"]), threshold=0.8, limit="available",
                    estimator="neurolink:{provider}",
                    description="seed 000: tool outputs cut to 50 KB / 2,000 lines; prune, "
                                "dedup, summarize, truncate at 80%")


def _probe() -> Pipeline:
    # the older segments' final tool results lose their calls (seed 001's ``User → Tool
    # result``): providers refuse such requests, so repair gives them placeholder calls
    return Pipeline(name="probe", stages=stages_from(["monologue"]),
                    post=stages_from(["repair"]), threshold=1.0, limit="window",
                    estimator="probe",
                    description="seed 001: drop older segments' monologue on overflow")


def _ai_agent() -> Pipeline:
    return Pipeline(name="ai-agent",
                    always=stages_from([("truncate_tool_output",   # seed 002: bytes only
                                         {"max_bytes": 12_288, "max_lines": None,
                                          "handle": True})]),
                    threshold=1.0, limit="effective", on_over="final",
                    estimator="max:tiktoken:cl100k_base,chars:4",
                    default_window=AI_AGENT_DEFAULT_CONTEXT_WINDOW,
                    description="seed 002: cut big tool outputs; force a final turn over limit")


def _copilot_legacy() -> Pipeline:
    return Pipeline(name="copilot-legacy",
                    always=stages_from(["monologue", ("keep_last", {"keep": 30,
                                                                    "scope": "history"}),
                                        "carry_forward"]),
                    stages=stages_from([("summarize", {"mode": "blocks"})]),
                    post=stages_from(["repair"]),       # monologue's orphans (see probe)
                    threshold=1.0, limit="fixed", limit_tokens=COPILOT_AUTO_COMPACT,
                    trigger_layers=("carried", "current", "prompt"), estimator="chars:4",
                    description="seed 003 as shipped: only L2+L3+L5 checked")


def _copilot_fixed() -> Pipeline:
    # 1.1: L2+L3 compaction when L2+L3(+L5) > autoCompactThreshold − L1 (history apart);
    # 1.2/1.3: at assembly, every request, history within threshold − non-L4 − 4,096;
    # 1.4: BufferWindowMemory's k is 100 messages, not contextTurns × 2
    return Pipeline(name="copilot-fixed",
                    always=stages_from(["monologue", ("keep_last", {"keep": 100,
                                                                    "scope": "history"}),
                                        "carry_forward"]),
                    stages=stages_from([("summarize", {"mode": "blocks"})]),
                    enforce=stages_from([("carry_forward", {"layers": ("system",),
                                                            "section_chars": 100,
                                                            "min_room": 4_096}),
                                         "trim_history"]),
                    post=stages_from(["repair"]),
                    threshold=1.0, limit="fixed", limit_tokens=COPILOT_AUTO_COMPACT,
                    trigger_layers=("system", "tools", "carried", "current", "prompt"),
                    estimator="chars:4",
                    description="seed 003's fix: L1-aware trigger, history budgeted on "
                                "every request")


def _neuron() -> Pipeline:
    # seed 004's loop checks token_estimate(messages): tool definitions are apart
    return Pipeline(name="neuron", stages=stages_from([("clear_tool_results", {"keep": 2}),
                                                       ("keep_last", {"keep": 10})]),
                    threshold=1.0, limit="fixed", limit_tokens=NEURON_TRIGGER,
                    trigger_tools=False,
                    estimator="neuron",
                    description="seed 004: clear tool results, then a sliding window")


def _observation_masking() -> Pipeline:
    return Pipeline(name="observation-masking",
                    always=stages_from([("clear_tool_results", {"keep": 10})]),
                    stages=stages_from([("keep_last", {"keep": 40})]),
                    post=stages_from(["repair"]), threshold=1.0, limit="window",
                    estimator="chars:4",
                    description="keep the 10 latest tool outputs; window as a last resort")


def claude_code(log: Transcript | Corpus | None = None) -> Pipeline:
    """Claude Code's auto-compaction (the ``claude-code`` preset), optionally for one log.

    Claude Code compacts when its context passes ``window − min(max output, 20k) − 13k``:
    167k of a 200k window (the ``autocompact`` limit, at threshold 1.0; 67k of a 100k
    window, where 83.5% of the window would be 83.5k). It measures the reported usage of
    its last call plus an estimate of what came after; on the real logs that check, rebuilt by
    `ctxlab.fidelity.claude_code_checks_df`, first passes 167k exactly at each recorded
    compaction (preTokens 167,094–170,251; every earlier check at most 166,772).
    Compaction is one summary, then the 5 most recently modified files (5k tokens each,
    50k in all) and the plan (`ctxlab.stages.reattach`).

    Args:
        log: the log this pipeline will replay. Where it recorded a compaction, its own
            summary stands in for the summarizer (`ctxlab.summarizers.recorded`), so the
            request after a compaction at the same point is the real one as far as the
            log knows it; elsewhere the ``structured`` summarizer writes it. None: always
            ``structured``.

    Example:
        >>> claude_code().stages[0].summarize.summarizer
        'structured'
    """
    summarize = claude_code_summarize()
    if log is not None:
        from ctxlab.summarizers.recorded import recorded_summarizer
        summarize = claude_code_summarize(summarizer=recorded_summarizer(log).name)
    return Pipeline(name="claude-code", stages=(Reattach(summarize=summarize),),
                    post=stages_from(["repair"]), threshold=1.0, trigger_on="reported",
                    limit="autocompact", estimator="tiktoken:o200k_base",
                    description="Claude Code: one summary, then recent files and the plan")


_PRESETS: dict[str, Preset] = {}


def register_preset(p: Preset) -> Preset:
    """Add a preset; a second one with the same name is an error."""
    if p.name in _PRESETS:
        raise ConfigError(f"a preset named {p.name!r} is already registered")
    _PRESETS[p.name] = p
    return p


for _p in (Preset(name="neurolink", make=_neurolink, source="seed 000"),
           Preset(name="probe", make=_probe, source="seed 001"),
           Preset(name="ai-agent", make=_ai_agent, source="seed 002"),
           Preset(name="copilot-legacy", make=_copilot_legacy, source="seed 003"),
           Preset(name="copilot-fixed", make=_copilot_fixed, source="seed 003 fix plan"),
           Preset(name="neuron", make=_neuron, source="seed 004"),
           Preset(name="observation-masking", make=_observation_masking,
                  source="observation masking (keep the last N tool outputs)"),
           Preset(name="claude-code", make=claude_code,
                  source="Claude Code 2.1.39 auto-compaction, fitted on real logs")):
    register_preset(_p)


def preset_names() -> list[str]:
    """Every preset name."""
    return sorted(_PRESETS)


def preset(name: str, **changes: Any) -> Pipeline:
    """The pipeline of a preset, optionally with fields replaced (``threshold=0.7``).

    Raises:
        ConfigError: unknown preset (listing the known ones) or unknown field.
    """
    if name not in _PRESETS:
        raise ConfigError(f"unknown preset {name!r}; presets: {', '.join(preset_names())}")
    return changed(_PRESETS[name].make(), **changes)
