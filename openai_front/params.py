"""What the front does with each parameter the official `openai` SDK may send to
`chat.completions.create` (as vLLM decides per parameter): honour it, accept and ignore it
(documented in docs/openai-api.md), or refuse it with a 400 `code: "unsupported_parameter"`
naming it.  A refused parameter is still accepted when it asks for the default (null, false,
an empty list or object, or the value named in `harmless`): clients that always send it work.

tests/unit/test_openai_params.py holds this table to the installed SDK's parameter list and to
the request schema, so a new SDK parameter fails a test until it is decided here."""

from __future__ import annotations

from dataclasses import dataclass

from contract import sampling_fields
from contract.sampling_fields import OpenAiKind
from openai_front.errors import unsupported

HONOUR, IGNORE, REFUSE = "honour", "accept and ignore", "refuse"


@dataclass(frozen=True)
class Policy:
    action: str
    why: str
    harmless: tuple = ()  # REFUSE: values that ask for what we do anyway


CHAT_PARAMETERS: dict[str, Policy] = {
    # the sampling fields of OpenAI's API (contract/sampling_fields.py)
    **{f.name: Policy(HONOUR, f.openai.note) for f in sampling_fields.FIELDS if f.openai.kind == OpenAiKind.SDK},
    "model": Policy(HONOUR, "the served model or `<model>:<adapter>`"),
    "messages": Policy(HONOUR, "text content; images and audio parts are refused"),
    "max_tokens": Policy(HONOUR, ""),
    "max_completion_tokens": Policy(HONOUR, "wins over max_tokens"),
    "n": Policy(HONOUR, "1-16; 1 with tool_choice auto"),
    "stop": Policy(HONOUR, ""),
    "stream": Policy(HONOUR, ""),
    "stream_options": Policy(HONOUR, "include_usage; vLLM's continuous_usage_stats (VLLM_EXTENSIONS)"),
    "logprobs": Policy(HONOUR, "text answers (refused with tools unless tool_choice is none)"),
    "top_logprobs": Policy(HONOUR, "0-20"),
    "response_format": Policy(HONOUR, "guided decoding"),
    "tools": Policy(HONOUR, "function tools"),
    "tool_choice": Policy(HONOUR, "auto, none, required, a named function"),
    "parallel_tool_calls": Policy(HONOUR, "false: at most one call per answer"),
    "user": Policy(IGNORE, "an end-user id for abuse monitoring; nothing is monitored or logged"),
    "safety_identifier": Policy(IGNORE, "the successor of user; the same"),
    "store": Policy(IGNORE, "nothing is stored: answers cannot be retrieved later"),
    "metadata": Policy(IGNORE, "tags for stored completions; nothing is stored"),
    "service_tier": Policy(IGNORE, "one tier; responses carry no service_tier"),
    "reasoning_effort": Policy(IGNORE, "the served models do not reason before answering"),
    "verbosity": Policy(IGNORE, "the model's own length; bound it with max_tokens"),
    "prediction": Policy(IGNORE, "a latency hint only (predicted outputs); the answer is the same without it"),
    "prompt_cache_key": Policy(IGNORE, "prefix caching is automatic where the engine has it"),
    "prompt_cache_retention": Policy(IGNORE, "the same"),
    "prompt_cache_options": Policy(IGNORE, "the same"),
    "logit_bias": Policy(REFUSE, "the engines take no per-token bias"),
    "modalities": Policy(REFUSE, "text only", harmless=(["text"],)),
    "audio": Policy(REFUSE, "text only"),
    "web_search_options": Policy(REFUSE, "no web search"),
    "moderation": Policy(REFUSE, "no moderation runs; ignoring it would look like safety that is not there"),
    "functions": Policy(REFUSE, "deprecated: use tools"),
    "function_call": Policy(REFUSE, "deprecated: use tool_choice"),
}


def _asks_default(value) -> bool:
    return value is None or value is False or value == [] or value == {}


def check_policy(req) -> None:
    """Refuse the REFUSE parameters a request sets to something we would not do."""
    for name, policy in CHAT_PARAMETERS.items():
        if policy.action != REFUSE:
            continue
        value = getattr(req, name, None)
        if not _asks_default(value) and value not in policy.harmless:
            raise unsupported(name, policy.why)


# vLLM's extensions of the two endpoints: ChatCompletionRequest's and CompletionRequest's
# "sampling params" and "extra params" blocks in vllm/entrypoints/openai/protocol.py (read at
# vllm-project/vllm commit 0052bed36509c7a5a2d8e48265334e40cf2f5a0e, the `--8<-- [start:
# chat-completion-sampling-params]`, `chat-completion-extra-params`, `completion-sampling-params`
# and `completion-extra-params` blocks, and StreamOptions), plus `structured_outputs`, the name
# newer releases give the guided_* fields.  Tools written for vLLM's server (guidellm, lm-eval,
# genai-perf's --extra-inputs) send them.  Each is honoured with vLLM's meaning, accepted and
# ignored where that changes no answer, or refused by name (unless it asks for vLLM's default).
CHAT, COMPLETIONS = "chat", "completions"
BOTH = (CHAT, COMPLETIONS)


@dataclass(frozen=True)
class Extension:
    policy: Policy
    endpoints: tuple[str, ...] = BOTH


def _x(action: str, why: str, harmless: tuple = (), endpoints: tuple[str, ...] = BOTH) -> Extension:
    return Extension(Policy(action, why, harmless), endpoints)


_NO_INPUT = "the ensemble (NVIDIA's inflight_batcher_llm contract, contract/tensors.py) has no input for it"
VLLM_EXTENSIONS: dict[str, Extension] = {
    # the sampling fields vLLM and TGI add (contract/sampling_fields.py)
    **{f.name: _x(HONOUR, f.openai.note) for f in sampling_fields.FIELDS if f.openai.kind == OpenAiKind.EXTENSION},
    "ignore_eos": _x(HONOUR, "needs max_tokens: generates exactly max_tokens (min_tokens = max_tokens)"),
    "skip_special_tokens": _x(HONOUR, ""),
    "guided_json": _x(HONOUR, "guided decoding (one guide per request)"),
    "guided_regex": _x(HONOUR, "guided decoding"),
    "guided_grammar": _x(HONOUR, "guided decoding (EBNF)"),
    "response_format": _x(HONOUR, "on /v1/completions too, as vLLM", endpoints=(COMPLETIONS,)),
    "priority": _x(
        HONOUR,
        "NOT vLLM's meaning: a number in [0, 1], higher first (TensorRT-LLM's executor scale); "
        "vLLM's is an integer, lower first",
    ),
    "request_id": _x(
        HONOUR,
        "the engine request's id and the response id (`chatcmpl-<id>`, `cmpl-<id>`); an "
        "X-Request-Id header wins, as in vLLM; ids outside [A-Za-z0-9._:@/+=-]{1,128} are refused",
    ),
    "include_stop_str_in_output": _x(
        REFUSE,
        "with 'stop': postprocessing cuts the answer before the stop string and returns no stop_reason; "
        "without 'stop' there is no stop string to include, so true is accepted",
    ),
    "include_reasoning": _x(IGNORE, "the served models write no reasoning", endpoints=(CHAT,)),
    "guided_decoding_backend": _x(IGNORE, "one backend per engine; the output follows the guide either way"),
    "add_generation_prompt": _x(
        HONOUR,
        "as preprocessing renders the chat template: true when the last message is not the "
        "assistant's, false when it is; the other combinations are refused",
        endpoints=(CHAT,),
    ),
    "continue_final_message": _x(
        REFUSE, "preprocessing closes a final assistant message (the template's end of turn)", endpoints=(CHAT,)
    ),
    "chat_template_kwargs": _x(
        REFUSE,
        "preprocessing renders the served model's template with fixed arguments; " + _NO_INPUT,
        endpoints=(CHAT,),
    ),
    "chat_template": _x(REFUSE, "the served model's own template only", endpoints=(CHAT,)),
    "documents": _x(REFUSE, "the template is rendered with messages only; " + _NO_INPUT, endpoints=(CHAT,)),
    "mm_processor_kwargs": _x(REFUSE, "text only", endpoints=(CHAT,)),
    "echo": _x(
        REFUSE, "prepending the last message is not done; on /v1/completions see 'echo' there", endpoints=(CHAT,)
    ),
    "best_of": _x(REFUSE, "only 1", harmless=(1,), endpoints=(CHAT,)),
    "bad_words": _x(
        REFUSE, "not forwarded by the front (the ensemble's bad_words: TensorRT-LLM only)", endpoints=(CHAT,)
    ),
    "stop_token_ids": _x(
        REFUSE,
        "the ensemble takes stop words as text (stop_words) and one end_id that replaces the model's EOS; "
        "a stop on token ids would need a new ensemble input",
    ),
    "use_beam_search": _x(REFUSE, "no beam search (beam_width 1)"),
    "length_penalty": _x(REFUSE, "beam search only", harmless=(1, 1.0)),
    "spaces_between_special_tokens": _x(REFUSE, "the detokenizer's own spacing", harmless=(True,)),
    "truncate_prompt_tokens": _x(REFUSE, "prompts are not truncated: too long is refused naming max_input_len"),
    "prompt_logprobs": _x(
        HONOUR,
        "0-20: per prompt token {token id: {logprob, rank, decoded_token}} (the first null), on each completions "
        "choice and on the chat response, as vLLM; the engine's numbers (input prompt_logprobs: the CPU engine's "
        "scorer, where it serves top_logprobs; other engines refuse it by name); not streamed, n 1",
    ),
    "allowed_token_ids": _x(REFUSE, "the engines take no per-token mask"),
    "guided_choice": _x(HONOUR, "guided decoding: an EBNF grammar of exactly these strings"),
    "guided_whitespace_pattern": _x(REFUSE, "the grammar's own whitespace"),
    "structural_tag": _x(REFUSE, "not a guide type the engines take", endpoints=(CHAT,)),
    "structured_outputs": _x(
        HONOUR,
        "json, regex, choice, grammar or json_object, as the guided_* fields (vllm/sampling_params.py "
        "StructuredOutputsParams @00388f65); structural_tag and the whitespace options refused by name",
    ),
    "logits_processors": _x(REFUSE, "no custom logits processors are loaded"),
    "return_tokens_as_token_ids": _x(REFUSE, "log probs name tokens by their text"),
    "cache_salt": _x(REFUSE, "the prefix cache is not salted per request; ignoring it would share it silently"),
    "kv_transfer_params": _x(REFUSE, "no disaggregated serving"),
    "vllm_xargs": _x(REFUSE, "no custom extensions"),
    "add_special_tokens": _x(
        REFUSE,
        "chat: the template adds what it needs (vLLM's default, false); completions: the deployment decides",
        harmless=(False,),
    ),
    "prompt_embeds": _x(REFUSE, "text prompts only", endpoints=(COMPLETIONS,)),
}
STREAM_OPTIONS = {
    "include_usage": Policy(HONOUR, "a last chunk with the usage of the whole answer"),
    "continuous_usage_stats": Policy(
        HONOUR, "vLLM's: every chunk carries the usage so far; implies include_usage (vLLM's default)"
    ),
}


def check_extensions(req, endpoint: str) -> None:
    """Refuse the REFUSE extensions a request sets to something we would not do (`endpoint`:
    CHAT or COMPLETIONS)."""
    for name, extension in VLLM_EXTENSIONS.items():
        policy = extension.policy
        if policy.action != REFUSE or endpoint not in extension.endpoints:
            continue
        value = getattr(req, name, None)
        if name == "include_stop_str_in_output" and not req.stop:
            continue
        if name == "add_special_tokens" and endpoint == COMPLETIONS:
            refused = value is not None  # false is not the default here: the deployment's setting is
        else:
            # harmless given: exactly vLLM's defaults (false may not be one); else null/false/empty
            refused = value is not None and (
                value not in policy.harmless if policy.harmless else not _asks_default(value)
            )
        if refused:
            raise unsupported(name, policy.why)
