"""What the other APIs on the chat path share (/v1/responses: openai_front/responses.py,
/v1/messages: openai_front/messages.py): their text content read part by part, and the chat
path's errors said back in their own names (each request becomes a chat completion request,
whose translation names the chat request's parameters)."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import pydantic

from openai_front.errors import ApiError, invalid


def joined_text(content: Any, where: str, parts: str, text: Callable[[Any, str], str]) -> str:
    """A string, or a list of parts (named `parts` in the error) -> their texts joined; `text`
    reads one part (at `where[j]`) or refuses it."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(f"'{where}' must be a string or a list of {parts}", where)
    return "".join(text(part, f"{where}[{j}]") for j, part in enumerate(content))


@dataclass(frozen=True)
class Renaming:
    """The chat path's names -> another API's: `params` where a message quotes a parameter,
    `phrases` for other wording; `param` renames an error's parameter, `param_at` names the parameter
    of a validation error's location (never empty)."""

    params: dict[str, str]
    param: Callable[[str], str]
    param_at: Callable[[str], str]
    phrases: dict[str, str] = field(default_factory=dict)

    def error(self, e: ApiError) -> ApiError:
        """An error of the chat path, in this API's terms."""
        message = e.message
        for chat, ours in self.params.items():
            if chat != ours:
                message = message.replace(f"'{chat}'", f"'{ours}'")
        for chat, ours in self.phrases.items():
            message = message.replace(chat, ours)
        param = None if e.param is None else self.param(e.param)
        return ApiError(e.status, message, param=param, type_=e.type, code=e.code)

    @contextmanager
    def spoken(self) -> Iterator[None]:
        """The chat path's ApiErrors and the chat request's validation errors raised inside,
        as this API's errors."""
        try:
            yield
        except ApiError as e:
            raise self.error(e) from None
        except pydantic.ValidationError as e:
            first = e.errors()[0]
            name = self.param_at(".".join(str(x) for x in first.get("loc", ())))
            raise invalid(f"{name}: {first.get('msg')}", name) from None


def chat_tools(tools: list[dict] | None, function: Callable[[dict, str], dict]) -> list[dict] | None:
    """Another API's tools -> the chat request's function tools (None for none); `function` reads
    one tool (at `tools[i]`) as the chat request's function, or refuses it."""
    if not tools:
        return None
    return [{"type": "function", "function": function(tool, f"tools[{i}]")} for i, tool in enumerate(tools)]
