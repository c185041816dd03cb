"""A chat message as the ensemble's `messages` input carries it (a JSON list of {role, content}):
the one type the client sends and preprocessing parses."""

from __future__ import annotations

from dataclasses import dataclass

CHAT_ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class ChatMessage:
    role: str  # one of CHAT_ROLES
    content: str
