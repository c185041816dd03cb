"""The prompt's log probs in OpenAI's and vLLM's bodies: `echo` with `logprobs` on /v1/completions
(OpenAI's legacy completions, as vLLM serves them: the prompt tokens' entries first, the first
token's log prob null, then the generated tokens'), `max_tokens: 0` with `echo` (the prompt scored,
nothing generated: what lm-evaluation-harness's loglikelihood requests ask), and vLLM's
`prompt_logprobs` (an int: per prompt token {token id: {logprob, rank, decoded_token}}, the first
null; on each completion choice and on the chat response).  The numbers are the engine's
(input prompt_logprobs: the CPU engine's scorer over the served IR,
model_repository/engine_step/prompt_logprobs.py)."""

from __future__ import annotations

from dataclasses import dataclass

from client.types import GenerationResult, PromptLogprobs
from contract.tensors import MAX_TOP_LOGPROBS
from openai_front.errors import ApiError, invalid, unsupported
from openai_front.logprobs import TokenTexts

MAX_PROMPT_LOGPROBS = MAX_TOP_LOGPROBS  # the engine contract's bound (vLLM's -1, every token, is refused)


@dataclass(frozen=True)
class PromptShape:
    echo_logprobs: int | None = None  # completions `echo` + `logprobs` k: the prompt leads `logprobs`
    prompt_only: bool = False  # `max_tokens: 0`: the answer is the prompt, nothing generated
    vllm: int | None = None  # vLLM's `prompt_logprobs` k

    @property
    def engine_k(self) -> int | None:
        """The alternatives the engine computes per prompt position (input prompt_logprobs); None: none."""
        asked = [k for k in (self.echo_logprobs, self.vllm) if k is not None]
        return max(asked) if asked else None


def prompt_shape(req, *, echo: bool, log_probs: bool, top: int) -> PromptShape | None:
    """What the request asks of the prompt (None: nothing); refuses what the front does not serve."""
    max_tokens = req.max_tokens
    if req.prompt_logprobs is not None and not 0 <= req.prompt_logprobs <= MAX_PROMPT_LOGPROBS:
        raise invalid(
            f"'prompt_logprobs' must be in [0, {MAX_PROMPT_LOGPROBS}], got {req.prompt_logprobs}", "prompt_logprobs"
        )
    if max_tokens == 0 and not echo:
        raise invalid("'max_tokens' 0 needs 'echo' true (the prompt scored, nothing generated)", "max_tokens")
    if max_tokens == 0 and req.min_tokens:
        raise invalid("'min_tokens' must be 0 with 'max_tokens' 0", "min_tokens")
    shape = PromptShape(top if echo and log_probs else None, max_tokens == 0, req.prompt_logprobs)
    if shape.engine_k is None and not shape.prompt_only:
        return None
    if req.stream:
        raise unsupported(
            "stream",
            "with the prompt's log probs (echo with logprobs, max_tokens 0, prompt_logprobs): send stream false",
        )
    if req.n != 1:
        raise unsupported("n", "only 1 with the prompt's log probs (echo with logprobs, prompt_logprobs)")
    return shape


def _top(texts: TokenTexts, alternatives, k: int) -> dict[str, float]:
    return {texts.entry(t)[0]: float(lp) for t, lp in alternatives[:k]}


def legacy(texts: TokenTexts, prompt: PromptLogprobs, k: int, offset: int = 0) -> dict:
    """The prompt's part of the completions `logprobs` (tokens, token_logprobs, text_offset,
    top_logprobs: at most k + 1 entries each, the first null)."""
    tokens, offsets = [], []
    tops: list[dict[str, float] | None] = []
    for i, (token_id, lp) in enumerate(zip(prompt.token_ids, prompt.log_probs)):
        text, _ = texts.entry(token_id)
        tokens.append(text)
        offsets.append(offset)
        offset += len(text)
        if lp is None:
            tops.append(None)
            continue
        top = _top(texts, prompt.top_logprobs[i], k)
        top.setdefault(text, lp)
        tops.append(top)
    return {"tokens": tokens, "token_logprobs": list(prompt.log_probs), "text_offset": offsets, "top_logprobs": tops}


def vllm_entries(texts: TokenTexts, prompt: PromptLogprobs, k: int) -> list[dict | None]:
    """vLLM's prompt_logprobs: per token {token id: {logprob, rank, decoded_token}} for the token
    and its k most likely alternatives (rank 1 = most likely; a token outside them: rank null)."""
    out: list[dict | None] = []
    for i, (token_id, lp) in enumerate(zip(prompt.token_ids, prompt.log_probs)):
        if lp is None:
            out.append(None)
            continue
        alternatives = prompt.top_logprobs[i]
        ranks = {t: r for r, (t, _) in enumerate(alternatives, 1)}
        entry = {
            str(t): {"logprob": float(a), "rank": r, "decoded_token": texts.entry(t)[0]}
            for r, (t, a) in enumerate(alternatives[:k], 1)
        }
        entry[str(token_id)] = {"logprob": lp, "rank": ranks.get(token_id), "decoded_token": texts.entry(token_id)[0]}
        out.append(entry)
    return out


def shape_choice(
    choice: dict, result: GenerationResult, shape: PromptShape, texts: TokenTexts | None, prompt_text: str
) -> dict:
    """A completions choice with the prompt's parts (`choice` as ResponseShaper.whole made it)."""
    prompt = result.prompt_logprobs
    if shape.prompt_only:
        choice = choice | {"text": prompt_text, "finish_reason": "length", "logprobs": None}
    if shape.engine_k is None:
        return choice
    if prompt is None or texts is None:
        raise RuntimeError("the engine returned no prompt log probs although asked, or the front has no tokenizer")
    if shape.echo_logprobs is not None:
        head = legacy(texts, prompt, shape.echo_logprobs)
        if not shape.prompt_only:
            offset = sum(len(t) for t in head["tokens"])
            generated = texts.completion(
                result.token_ids, result.log_probs, offset, tops=result.top_logprobs if shape.echo_logprobs else ()
            )
            head = {key: head[key] + (generated[key] or []) for key in head}
        if not shape.echo_logprobs:
            head["top_logprobs"] = None
        choice = choice | {"logprobs": head}
    if shape.vllm is not None:
        choice = choice | {"prompt_logprobs": vllm_entries(texts, prompt, shape.vllm)}
    return choice


def as_asked(error: ApiError, shape: PromptShape | None) -> ApiError:
    """An engine's refusal of the ensemble input prompt_logprobs, named as the request asked for the
    prompt's log probs (`echo` with `logprobs` when it sent no `prompt_logprobs`)."""
    if shape is None or error.param != "prompt_logprobs" or shape.vllm is not None:
        return error
    return ApiError(error.status, error.message.replace("'prompt_logprobs'", "'echo' with 'logprobs'", 1), param="echo")
