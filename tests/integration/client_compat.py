"""The client libraries' checks against a live front, one library per run, run by
tests/integration/test_client_compat.py inside a side environment with the library's pinned
release (requirements/client-compat*.lock): `python client_compat.py LIBRARY BASE_URL MODEL`.

Standalone on purpose (the side environment has the library, not this project).  It prints one
JSON object: {"results": {feature: "pass" | "fail: why" }, "transcript": [...]}: every check
runs even when one fails, so the table shows each library's whole picture."""

from __future__ import annotations

import json
import os
import sys
import traceback

FEATURES = ("text", "structured output", "tools auto", "tools required", "tools named", "streaming",
            "Responses API", "system prompt", "stop sequences", "usage", "errors")
ASK = "What is the weather in Paris?"
RESULT = {"city": "Paris", "temperature_c": 18, "sky": "sunny"}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CHAT_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city",
                                              "parameters": SCHEMA}}
RESPONSES_TOOL = {"type": "function", "name": "get_weather", "description": "Get the current weather in a city",
                  "parameters": SCHEMA}
NAMED = {"type": "function", "function": {"name": "get_weather"}}
LIMIT = 60


def check(condition, what: str) -> None:
    if not condition:
        raise AssertionError(what)


def chat_round_trip(create, tool_choice, second_tool_choice="auto") -> None:
    """call -> the tool's result -> a text answer, with any `create(**kwargs)` that returns an
    OpenAI chat completion (the openai SDK, litellm)."""
    messages = [{"role": "user", "content": ASK}]
    first = create(messages=messages, tools=[CHAT_TOOL], tool_choice=tool_choice)
    choice = first.choices[0]
    check(choice.message.tool_calls, f"no tool call: {choice.message.content!r}")
    call = choice.message.tool_calls[0]
    check(call.function.name == "get_weather" and json.loads(call.function.arguments).get("city"),
          f"call {call.function.name}({call.function.arguments})")
    check(choice.finish_reason == "tool_calls", f"finish_reason {choice.finish_reason}")
    messages += [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": "get_weather", "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps(RESULT)}]
    answer = create(messages=messages, tools=[CHAT_TOOL], tool_choice=second_tool_choice).choices[0]
    check(answer.message.content and not answer.message.tool_calls, f"no text answer: {answer.message}")


# --- the openai SDK ---------------------------------------------------------------------------
def openai_sdk(base: str, model: str) -> dict:
    import openai
    from pydantic import BaseModel

    client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)

    def create(**kw):
        return client.chat.completions.create(model=model, max_tokens=LIMIT, temperature=0, **kw)

    class City(BaseModel):
        city: str
        country: str

    def text():
        r = create(messages=[{"role": "user", "content": "What is the capital of France?"}])
        check("Paris" in r.choices[0].message.content and r.usage.completion_tokens > 0, r.choices[0].message.content)

    def structured():
        r = client.chat.completions.parse(model=model, messages=[{"role": "user", "content": "Paris, as JSON."}],
                                          response_format=City, max_tokens=LIMIT, temperature=0)
        check(isinstance(r.choices[0].message.parsed, City), r.choices[0].message.content)

    def streaming():
        # (the helper raises LengthFinishReasonError on an answer max_tokens cut: one that ends)
        with client.chat.completions.stream(model=model, messages=[{"role": "user", "content": "Capital of France?"}],
                                            max_tokens=LIMIT, temperature=0) as stream:
            deltas = [e.delta for e in stream if e.type == "content.delta"]
            final = stream.get_final_completion()
        check(deltas and "".join(deltas) == final.choices[0].message.content, "content.delta events")
        with client.chat.completions.stream(model=model, messages=[{"role": "user", "content": ASK}],
                                            tools=[CHAT_TOOL], max_tokens=LIMIT, temperature=0) as stream:
            kinds = [e.type for e in stream]
            final = stream.get_final_completion()
        check("tool_calls.function.arguments.delta" in kinds and "tool_calls.function.arguments.done" in kinds,
              f"tool call events: {sorted(set(kinds))}")
        check(final.choices[0].message.tool_calls[0].function.name == "get_weather", "final tool call")

    def responses():
        r = client.responses.create(model=model, input="What is the capital of France?", max_output_tokens=32,
                                    temperature=0)
        check(r.status == "completed" and "Paris" in r.output_text, r.output_text)
        parsed = client.responses.parse(model=model, input="Paris, as JSON.", text_format=City,
                                        max_output_tokens=LIMIT, temperature=0)
        check(isinstance(parsed.output_parsed, City), "responses.parse")
        kw = dict(model=model, tools=[RESPONSES_TOOL], max_output_tokens=LIMIT, temperature=0)
        with client.responses.stream(input=ASK, **kw) as stream:
            kinds = [e.type for e in stream]
            first = stream.get_final_response()
        call = first.output[0]
        check(call.type == "function_call" and "response.function_call_arguments.delta" in kinds, str(first.output))
        answer = client.responses.create(previous_response_id=first.id, input=[
            {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps(RESULT)}], **kw)
        check(answer.output_text, str(answer.output))

    def errors():
        try:
            create(messages=[{"role": "user", "content": "Hi"}], logit_bias={"50256": -100})
        except openai.BadRequestError as e:
            check(e.body["param"] == "logit_bias" and e.body["code"] == "unsupported_parameter", str(e.body))
        else:
            raise AssertionError("logit_bias accepted")
        try:
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
        except openai.NotFoundError as e:
            check(e.body["code"] == "model_not_found", str(e.body))
        else:
            raise AssertionError("an unknown model accepted")

    return {"text": text, "structured output": structured,
            "tools auto": lambda: chat_round_trip(create, "auto"),
            "tools required": lambda: chat_round_trip(create, "required", "none"),
            "tools named": lambda: chat_round_trip(create, NAMED, "none"),
            "streaming": streaming, "Responses API": responses, "errors": errors}


# --- langchain-openai ---------------------------------------------------------------------------
TRANSCRIPT: list[str] = []


def langchain(base: str, model: str) -> dict:
    import openai
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel

    llm = ChatOpenAI(model=model, base_url=base + "/v1", api_key="none", temperature=0, max_tokens=LIMIT,
                     max_retries=0)

    @tool
    def get_weather(city: str) -> str:
        """Get the current weather in a city"""
        return json.dumps(RESULT | {"city": city})

    class City(BaseModel):
        city: str
        country: str

    def text():
        check("Paris" in llm.invoke("What is the capital of France?").content, "no Paris")

    def structured():
        for method in ("json_schema", "function_calling"):
            out = llm.with_structured_output(City, method=method).invoke("Paris, as JSON.")
            check(isinstance(out, City), f"{method}: {out!r}")

    def round_trip(tool_choice, log: bool = False):
        """The agent loop: the model chooses a tool, the tool runs, the model answers from its result."""
        bound = llm.bind_tools([get_weather], tool_choice=tool_choice)
        messages = [HumanMessage(ASK)]
        step = bound.invoke(messages)
        check(step.tool_calls and step.tool_calls[0]["name"] == "get_weather", f"no tool call: {step.content!r}")
        messages.append(step)
        for call in step.tool_calls:
            output = get_weather.invoke(call["args"])
            messages.append(ToolMessage(output, tool_call_id=call["id"]))
        answer = (llm.bind_tools([get_weather]) if tool_choice in (None, "auto") else llm).invoke(messages)
        check(answer.content and not answer.tool_calls, f"no text answer: {answer!r}")
        if log:
            for m in messages + [answer]:
                calls = getattr(m, "tool_calls", None)
                TRANSCRIPT.append(f"{m.type}: " + (json.dumps([{"name": c["name"], "args": c["args"]} for c in calls])
                                                   if calls else str(m.content)))

    def streaming():
        chunks = list(llm.stream("Say hi."))
        check(len(chunks) > 1 and "".join(c.content for c in chunks), "text chunks")
        gathered = None
        for chunk in llm.bind_tools([get_weather]).stream(ASK):
            gathered = chunk if gathered is None else gathered + chunk
        check(gathered.tool_calls and gathered.tool_calls[0]["name"] == "get_weather"
              and gathered.tool_calls[0]["args"].get("city"), f"streamed tool call: {gathered!r}")

    def responses():
        r = ChatOpenAI(model=model, base_url=base + "/v1", api_key="none", temperature=0, max_tokens=32, max_retries=0,
                       use_responses_api=True).invoke("What is the capital of France?")
        check("Paris" in r.text, repr(r.content))

    def errors():
        try:
            ChatOpenAI(model="gpt-4o", base_url=base + "/v1", api_key="none", max_retries=0).invoke("Hi")
        except openai.NotFoundError as e:
            check(e.body["code"] == "model_not_found", str(e.body))
        else:
            raise AssertionError("an unknown model accepted")

    return {"text": text, "structured output": structured, "tools auto": lambda: round_trip("auto", log=True),
            "tools required": lambda: round_trip("any"), "tools named": lambda: round_trip("get_weather"),
            "streaming": streaming, "Responses API": responses, "errors": errors}


# --- litellm --------------------------------------------------------------------------------------
def litellm_checks(base: str, model: str) -> dict:
    import litellm

    target = dict(model=f"openai/{model}", api_base=base + "/v1", api_key="none")

    def create(**kw):
        return litellm.completion(**target, max_tokens=LIMIT, temperature=0, **kw)

    def text():
        r = create(messages=[{"role": "user", "content": "What is the capital of France?"}])
        check("Paris" in r.choices[0].message.content, r.choices[0].message.content)

    def structured():
        fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA, "strict": True}}
        r = create(messages=[{"role": "user", "content": "Paris, as JSON."}], response_format=fmt)
        check(json.loads(r.choices[0].message.content).get("city"), r.choices[0].message.content)

    def streaming():
        chunks = list(create(messages=[{"role": "user", "content": "Say hi."}], stream=True))
        rebuilt = litellm.stream_chunk_builder(chunks)
        check(len(chunks) > 1 and rebuilt.choices[0].message.content, "text chunks")
        chunks = list(create(messages=[{"role": "user", "content": ASK}], tools=[CHAT_TOOL], stream=True))
        call = litellm.stream_chunk_builder(chunks).choices[0].message.tool_calls[0]
        check(call.function.name == "get_weather" and json.loads(call.function.arguments).get("city"), str(call))

    def responses():
        r = litellm.responses(**target, input="What is the capital of France?", max_output_tokens=32, temperature=0)
        text = "".join(part.text for item in r.output if item.type == "message" for part in item.content)
        check("Paris" in text, text)

    def errors():
        try:
            create(messages=[{"role": "user", "content": "Hi"}], logit_bias={"50256": -100})
        except litellm.BadRequestError as e:
            check("logit_bias" in str(e), str(e))
        else:
            raise AssertionError("logit_bias accepted")

    return {"text": text, "structured output": structured,
            "tools auto": lambda: chat_round_trip(create, "auto"),
            "tools required": lambda: chat_round_trip(create, "required", "none"),
            "tools named": lambda: chat_round_trip(create, NAMED, "none"),
            "streaming": streaming, "Responses API": responses, "errors": errors}


# --- instructor -------------------------------------------------------------------------------------
def instructor_checks(base: str, model: str) -> dict:
    import instructor
    import openai
    from pydantic import BaseModel

    class Weather(BaseModel):
        city: str

    raw = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
    kw = dict(model=model, messages=[{"role": "user", "content": ASK}], max_tokens=LIMIT, temperature=0,
              max_retries=0)

    def structured():  # response_format json_schema
        out = instructor.from_openai(raw, mode=instructor.Mode.JSON_SCHEMA).chat.completions.create(
            response_model=Weather, **kw)
        check(isinstance(out, Weather) and out.city, repr(out))

    def named():  # Mode.TOOLS: a named tool call
        out = instructor.from_openai(raw, mode=instructor.Mode.TOOLS).chat.completions.create(response_model=Weather,
                                                                                              **kw)
        check(isinstance(out, Weather) and out.city, repr(out))

    def streaming():  # partial objects from the streamed tool call's arguments
        client = instructor.from_openai(raw, mode=instructor.Mode.TOOLS)
        partials = list(client.chat.completions.create_partial(response_model=Weather, **kw))
        check(partials and partials[-1].city, repr(partials[-1:]))

    def errors():
        try:
            instructor.from_openai(raw).chat.completions.create(response_model=Weather, **(kw | {"model": "gpt-4o"}))
        except Exception as e:  # instructor passes the SDK's error on (or wraps it, saying so)
            check("model_not_found" in str(e) or isinstance(e, openai.NotFoundError), f"{type(e).__name__}: {e}")
        else:
            raise AssertionError("an unknown model accepted")

    return {"structured output": structured, "tools named": named, "streaming": streaming, "errors": errors}


# --- the anthropic SDK, against /v1/messages -------------------------------------------------------
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Get the current weather in a city", "input_schema": SCHEMA}


def anthropic_checks(base: str, model: str) -> dict:
    import anthropic

    client = anthropic.Anthropic(base_url=base, api_key="none", max_retries=0)
    greedy = {"temperature": 0}  # the SDK 2.x has no temperature argument; the API still takes it

    def create(**kw):
        return client.messages.create(model=model, max_tokens=LIMIT, extra_body=greedy, **kw)

    def text_of(message) -> str:
        return "".join(b.text for b in message.content if b.type == "text")

    def text():
        r = create(messages=[{"role": "user", "content": "What is the capital of France?"}])
        check(r.type == "message" and r.stop_reason in ("end_turn", "max_tokens") and "Paris" in text_of(r), str(r))

    def system():  # the system prompt reaches the prompt: a longer one is counted longer
        ask = [{"role": "user", "content": "What is the capital of France?"}]
        short = create(messages=ask, system="You answer in one word.")  # (a template adds its own default)
        told = create(messages=ask, system=[{"type": "text", "text": "You answer in one word."},
                                            {"type": "text", "text": " You teach geography in Lyon."}])
        check(told.usage.input_tokens > short.usage.input_tokens and text_of(told), f"{short.usage} {told.usage}")

    def stop_sequences():
        ask = [{"role": "user", "content": "What is the capital of France?"}]
        r = create(messages=ask, stop_sequences=["Paris"])
        check(r.stop_reason == "stop_sequence" and r.stop_sequence == "Paris" and "Paris" not in text_of(r), str(r))

    def usage():
        ask = [{"role": "user", "content": "Say hi."}]
        whole = create(messages=ask)
        with client.messages.stream(model=model, max_tokens=LIMIT, messages=ask, extra_body=greedy) as stream:
            final = stream.get_final_message()
        check(whole.usage.input_tokens > 0 and whole.usage.output_tokens > 0, str(whole.usage))
        counted = client.messages.count_tokens(model=model, messages=ask)
        check(counted.input_tokens == whole.usage.input_tokens, f"count_tokens {counted} usage {whole.usage}")
        check((final.usage.input_tokens, final.usage.output_tokens) == (whole.usage.input_tokens,
                                                                       whole.usage.output_tokens),
              f"streamed {final.usage} whole {whole.usage}")

    def streaming():
        ask = [{"role": "user", "content": "Capital of France?"}]
        with client.messages.stream(model=model, max_tokens=LIMIT, messages=ask, extra_body=greedy) as stream:
            texts = list(stream.text_stream)
            final = stream.get_final_message()
        check(texts and "".join(texts) == text_of(final) and final.stop_reason, "text_stream")
        with client.messages.stream(model=model, max_tokens=LIMIT, messages=[{"role": "user", "content": ASK}],
                                    tools=[ANTHROPIC_TOOL], tool_choice={"type": "any"}, extra_body=greedy) as stream:
            kinds = [e.type for e in stream]
            final = stream.get_final_message()
        call = [b for b in final.content if b.type == "tool_use"]
        check("input_json" in kinds and call and call[0].input.get("city"), f"{sorted(set(kinds))} {final.content}")

    def round_trip(tool_choice):
        """tool_use -> the tool's result (tool_result) -> a text answer."""
        messages = [{"role": "user", "content": ASK}]
        first = create(messages=messages, tools=[ANTHROPIC_TOOL], tool_choice=tool_choice)
        calls = [b for b in first.content if b.type == "tool_use"]
        check(first.stop_reason == "tool_use" and calls and calls[0].name == "get_weather"
              and calls[0].input.get("city"), str(first))
        messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id,
                                                   "content": json.dumps(RESULT)}]}]
        answer = create(messages=messages, tools=[ANTHROPIC_TOOL], tool_choice={"type": "none"})
        check(answer.stop_reason in ("end_turn", "max_tokens") and text_of(answer), str(answer))

    def errors():
        try:
            client.messages.create(model="claude-opus-4", max_tokens=8, messages=[{"role": "user", "content": "Hi"}])
        except anthropic.NotFoundError as e:
            check(e.body["type"] == "error" and e.body["error"]["type"] == "not_found_error", str(e.body))
        else:
            raise AssertionError("an unknown model accepted")
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
        try:
            create(messages=[{"role": "user", "content": [image]}])
        except anthropic.BadRequestError as e:
            check(e.body["error"]["type"] == "invalid_request_error"
                  and "messages[0].content[0].type" in e.body["error"]["message"], str(e.body))
        else:
            raise AssertionError("an image accepted")

    return {"text": text, "system prompt": system, "stop sequences": stop_sequences, "usage": usage,
            "streaming": streaming, "tools auto": lambda: round_trip({"type": "auto"}),
            "tools required": lambda: round_trip({"type": "any"}),
            "tools named": lambda: round_trip({"type": "tool", "name": "get_weather"}), "errors": errors}


LIBRARIES = {"openai": openai_sdk, "langchain-openai": langchain, "litellm": litellm_checks,
             "instructor": instructor_checks, "anthropic": anthropic_checks}


def main() -> None:
    library, base, model = sys.argv[1:4]
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download on import
    checks = LIBRARIES[library](base, model)
    results = {}
    for feature in FEATURES:
        if feature not in checks:
            results[feature] = "n/a"
            continue
        try:
            checks[feature]()
            results[feature] = "pass"
        except Exception as e:  # noqa: BLE001: each check's failure is its cell
            traceback.print_exc(file=sys.stderr)
            results[feature] = f"fail: {type(e).__name__}: {str(e)[:300]}"
    print(json.dumps({"results": results, "transcript": TRANSCRIPT}))


if __name__ == "__main__":
    main()
