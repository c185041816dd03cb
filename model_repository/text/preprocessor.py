"""Preprocessing logic: prompt -> token ids, words -> word lists, sampling settings resolved
against the checkpoint's generation defaults, and the postprocessing parameters."""

from __future__ import annotations

import dataclasses
import secrets
import uuid
from dataclasses import dataclass

from contract import lora
from contract.features import SAMPLING_INPUT_FEATURES, Feature, refusals
from contract.guided import guide_problems
from contract.model_configs import PreprocessingParameters
from contract.params import InvalidParameter, check_lengths, check_token_id, check_top_k
from contract.sampling_fields import SentSampling, as_sent_defaults
from model_repository.engine_step.engine_inputs import EngineInputs, GenerationOptions
from model_repository.text.generate_request import GenerateRequest
from model_repository.text.generation_defaults import GenerationDefaults
from model_repository.text.postprocess_params import PostprocessParams
from model_repository.text.tokenizer_class import TokenizerClass, load_tokenizer

OPTION_NAMES = tuple(f.name for f in dataclasses.fields(GenerationOptions))


@dataclass(frozen=True)
class Sampling:
    top_k: int
    top_p: float
    temperature: float
    seed: int


def resolve_sampling(req: SentSampling) -> Sampling:
    """TensorRT-LLM's rule, as NVIDIA's ensemble applies it: top_k and top_p default to 0 and
    (0, 0) is greedy, so sampling happens only when the request sets top_k > 1 or top_p > 0
    (temperature alone does not turn it on: contract/upstream/data/nvidia_behaviours_*.json);
    temperature 0 or top_k 1 is greedy too.  Greedy goes to the engine as TensorRT-LLM
    spells it: top_k 1, top_p 0, temperature 1.  The checkpoint's generation_config sampling
    defaults are not applied here (NVIDIA's ensemble does not read them); our client and
    OpenAI front send what their callers ask for.
    """
    top_k = req.top_k or 0
    top_p = req.top_p or 0.0
    temperature = 1.0 if req.temperature is None else req.temperature
    if temperature == 0 or top_k == 1 or (top_k == 0 and top_p == 0):
        return Sampling(top_k=1, top_p=0.0, temperature=1.0, seed=req.seed or 0)
    seed = req.seed if req.seed is not None else secrets.randbits(63)
    return Sampling(top_k=top_k, top_p=top_p, temperature=temperature, seed=seed)


def feature_fields_sent(req: SentSampling, sampling: Sampling) -> dict:
    """The sampling fields the request sent, as contract/features.py SAMPLING_INPUT_FEATURES checks
    them (an engine whose pinned version accepts and ignores one refuses it); a seed counts only
    when the request samples (greedy decoding draws nothing)."""
    sent = {name: getattr(req, name) for name in SAMPLING_INPUT_FEATURES if getattr(req, name) is not None}
    if sampling.top_k == 1 and sampling.top_p == 0.0:
        sent.pop("seed", None)
    return sent


def engine_sampling(req: SentSampling, sampling: Sampling) -> dict:
    """The engine inputs of the request's sampling (EngineInputs' fields): the resolved ones,
    and the others as sent or the engine's defaults for what it did not send."""
    return {
        "runtime_top_k": sampling.top_k,
        "runtime_top_p": sampling.top_p,
        "temperature": sampling.temperature,
        "seed": sampling.seed,
        **as_sent_defaults(req),
    }


class Preprocessor:
    def __init__(self, params: PreprocessingParameters, tokenizer=None) -> None:
        self.params = params
        self.engine = params.engine()
        self.defaults = GenerationDefaults.from_checkpoint(params.tokenizer_dir)
        if tokenizer is None:
            tokenizer = load_tokenizer(params.tokenizer_dir, TokenizerClass.recorded_in(params))
        self.tokenizer = tokenizer
        # lora_task_id -> adapter name (contract/lora.py request_problems)
        self.adapters = {i: name for name, i in lora.served_from_parameter(params.lora_adapters).items()}

    def check_lora(self, options: GenerationOptions) -> None:
        """An unknown lora_task_id is refused naming the served adapters (0: the base model)."""
        for problem in lora.request_problems(options.lora_task_id, self.adapters):
            raise InvalidParameter("lora_task_id", problem)

    # --- text -> ids --------------------------------------------------------------------
    def prompt_ids(self, req: GenerateRequest) -> list[int]:
        if req.messages is not None:
            if not getattr(self.tokenizer, "chat_template", None):
                raise InvalidParameter("messages", "this model has no chat template; send text_input")
            try:
                ids = self.tokenizer.apply_chat_template(
                    [{"role": m.role, "content": m.content} for m in req.messages],
                    add_generation_prompt=req.messages[-1].role != "assistant",
                    tokenize=True,
                    return_dict=True,
                )["input_ids"]
            except Exception as e:  # jinja raises on templates' own checks (e.g. role order)
                raise InvalidParameter("messages", f"the chat template rejected them: {e}") from None
            return list(ids)
        return self.tokenizer.encode(req.text, add_special_tokens=self.params.add_special_tokens)

    def word_variants(self, word: str) -> list[tuple[int, ...]]:
        """Token sequences the model may emit for `word`: alone and after a space (BPE and
        SentencePiece both fold a leading space into the first token)."""
        variants: list[tuple[int, ...]] = []
        for text in (word, " " + word):
            ids = tuple(self.tokenizer.encode(text, add_special_tokens=False))
            if ids and ids not in variants:
                variants.append(ids)
        return variants

    # --- the whole request ----------------------------------------------------------------
    def __call__(self, req: GenerateRequest) -> EngineInputs:
        if req.stop:  # forwarded to the engine step under the same request id
            return EngineInputs.stop_request()
        sampling = resolve_sampling(req)
        for name, reason in refusals(dict(req.feature_inputs), self.engine) + refusals(
            feature_fields_sent(req, sampling), self.engine, SAMPLING_INPUT_FEATURES
        ):
            raise InvalidParameter(name, reason)
        options = _options(dict(req.feature_inputs), *OPTION_NAMES)  # their ranges: contract/params.py
        if Feature.GUIDED_DECODING in self.engine.features:
            check_guide(options)
        if Feature.LORA in self.engine.features:
            self.check_lora(options)
        limits = self.params
        ids = self.prompt_ids(req)
        room = limits.max_seq_len - len(ids)
        max_tokens = min(limits.default_max_tokens, room) if req.max_tokens is None else req.max_tokens
        check_lengths(len(ids), max_tokens, limits.max_input_len, limits.max_seq_len)
        if req.end_id is not None:
            check_token_id("end_id", req.end_id, self.defaults.vocab_size)
        if req.top_k is not None:
            check_top_k(req.top_k, self.defaults.vocab_size)

        end_ids = (req.end_id,) if req.end_id is not None else self.defaults.eos_ids
        # TensorRT-LLM takes one end_id; the other EOS ids stop generation as stop words.
        stop_rows: list[tuple[int, ...]] = [(e,) for e in end_ids[1:]]
        for word in req.stop_words:
            stop_rows += [v for v in self.word_variants(word) if v not in stop_rows]
        bad_rows = [v for word in req.bad_words for v in self.word_variants(word)]
        post = PostprocessParams(
            stream_id=uuid.uuid4().hex,
            max_tokens=max_tokens,
            end_ids=tuple(end_ids),
            num_input_tokens=len(ids),
            streaming=req.stream,
            stop_strings=req.stop_words,
            skip_special_tokens=req.skip_special_tokens,
            # NVIDIA never streams the prompt back (upstream row streaming_never_echoes).
            echo_text="" if req.exclude_input_in_output or req.stream else (req.text or ""),
        )
        return EngineInputs(
            input_ids=tuple(ids),
            input_lengths=len(ids),
            request_output_len=max_tokens,
            end_id=end_ids[0],
            pad_id=self.defaults.pad_id if req.pad_id is None else req.pad_id,
            stop_words_list=tuple(stop_rows),
            bad_words_list=tuple(bad_rows),
            embedding_bias=self.embedding_bias(req),
            **engine_sampling(req, sampling),
            return_log_probs=req.return_log_probs,
            exclude_input_in_output=True,  # postprocessing echoes the prompt text if asked
            streaming=req.stream,
            detokenize_params=post.to_json(),
        )

    def embedding_bias(self, req: GenerateRequest) -> tuple[float, ...]:
        """[vocab] logit bias: each word's weight added on the tokens of the word (as NVIDIA's
        preprocessing builds it); empty when the request has none."""
        if not req.embedding_bias_words:
            return ()
        bias = [0.0] * self.defaults.vocab_size
        for word, weight in zip(req.embedding_bias_words, req.embedding_bias_weights):
            for token in self.tokenizer.encode(word, add_special_tokens=False):
                bias[token] += weight
        return tuple(bias)


def check_guide(options: GenerationOptions) -> None:
    """A guide the engine cannot enforce (an unknown guide type, a schema keyword the grammar
    would drop, a regex or grammar that does not compile) is refused here, naming it, for
    every engine: TensorRT-LLM's backend would decode a request with an unknown guide type
    unguided (row input.guided_decoding_guide_type) and its xgrammar ignores keywords it cannot
    express (contract/guided.py)."""
    if options.guided_decoding_guide_type:
        problems = guide_problems(options.guided_decoding_guide_type, options.guided_decoding_guide)
        if problems:
            raise InvalidParameter("guided_decoding_guide", "; ".join(problems))


def _options(feature_inputs: dict, *names: str) -> GenerationOptions:
    """The named engine options of a request, parsed and range-checked as the engine model
    parses them (GenerationOptions.from_arrays: contract/params.py); a value that is not
    even of its type is refused under the first name (the message names the input itself)."""
    try:
        return GenerationOptions.from_arrays({k: v for k, v in feature_inputs.items() if k in names})
    except InvalidParameter:
        raise
    except ValueError as e:
        raise InvalidParameter(names[0], str(e)) from None
