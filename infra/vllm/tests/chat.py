"""Drives vLLM's composed parser as chat serving does: whole outputs, and streams of deltas."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


def _tool(name: str, **params: str) -> dict[str, Any]:
    properties = {key: {"type": "string", "description": text} for key, text in params.items()}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool",
            "parameters": {"type": "object", "properties": properties, "required": list(params)},
        },
    }


TOOLS = [
    _tool("write", path="file to write", content="what the file holds"),
    _tool("bash", command="shell command to run"),
    _tool("read", path="file to read"),
]


def chat_request(tool_choice: Any = "auto", tools: list[dict[str, Any]] | None = None) -> Any:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    return ChatCompletionRequest(
        model="embedded",
        messages=[{"role": "user", "content": "Create hello.txt containing Hello"}],
        tools=TOOLS if tools is None else tools,
        tool_choice=tool_choice,
    )


@dataclass
class Call:
    id: str
    name: str
    arguments: str

    @property
    def fmt(self) -> str:
        """The format the parser tagged in the id: call_<format>_<random>."""
        return self.id.split("_")[1]

    def summary(self) -> tuple[str, str, dict[str, Any]]:
        return (self.fmt, self.name, json.loads(self.arguments))


@dataclass
class Outcome:
    content: str | None
    calls: list[Call]
    content_deltas: list[str] = field(default_factory=list)
    # For each delta fed in: the content sent and the number of calls known once it was parsed.
    timeline: list[tuple[str, int]] = field(default_factory=list)

    def summary(self) -> tuple[str | None, list[tuple[str, str, dict[str, Any]]]]:
        return (self.content, [call.summary() for call in self.calls])


def parse_whole(parser_cls: Any, tokenizer: Any, text: str, request: Any = None) -> Outcome:
    request = request or chat_request()
    parser = parser_cls(tokenizer, request.tools)
    _, content, calls = parser.parse(text, request, enable_auto_tools=True)
    return Outcome(content, [Call(c.id, c.name, c.arguments) for c in calls or []])


Chunker = Callable[[Any, str], list[str]]


def by_tokens(sizes: tuple[int, ...]) -> Chunker:
    """Deltas of the given numbers of tokens in turn, decoded the way vLLM's detokenizer sends them."""

    def chunk(tokenizer: Any, text: str) -> list[str]:
        ids = tokenizer.encode(text, add_special_tokens=False)
        pieces, sent, start = [], "", 0
        for size in itertools.cycle(sizes):
            if start >= len(ids):
                return pieces
            start += size
            decoded = tokenizer.decode(ids[:start])
            pieces.append(decoded[len(sent) :])
            sent = decoded

    return chunk


def by_characters(sizes: tuple[int, ...]) -> Chunker:
    def chunk(tokenizer: Any, text: str) -> list[str]:
        return list(_cut(text, itertools.cycle(sizes)))

    return chunk


def _cut(text: str, sizes: Iterator[int]) -> Iterator[str]:
    start = 0
    while start < len(text):
        size = next(sizes)
        yield text[start : start + size]
        start += size


CHUNKINGS = {
    "one token at a time": by_tokens((1,)),
    "a few tokens at a time": by_tokens((2, 5, 1, 3)),
    "odd character runs": by_characters((1, 4, 2, 9, 3, 17)),
}


def parse_stream(
    parser_cls: Any, tokenizer: Any, pieces: list[str], request: Any = None, cut_off: bool = False
) -> Outcome:
    """Feeds `pieces` as one generation's deltas; the last one finishes it.

    A generation that stops on its end-of-sequence token ends with an empty delta (the token's text is
    not sent); one cut off by max_tokens ends on a delta that still carries text.
    """
    request = request or chat_request()
    parser = parser_cls(tokenizer, request.tools)
    prompt = tokenizer.encode("Create hello.txt containing Hello")
    deltas = [(piece, tokenizer.encode(piece, add_special_tokens=False)) for piece in pieces]
    if not cut_off:
        deltas.append(("", [tokenizer.eos_token_id]))
    outcome = Outcome(content=None, calls=[])
    by_index: dict[int, Call] = {}
    for n, (text, ids) in enumerate(deltas):
        delta = parser.parse_delta(
            text, ids, request, prompt_token_ids=prompt if n == 0 else None, finished=n == len(deltas) - 1
        )
        sent = (delta.content or "") if delta else ""
        if sent:
            outcome.content_deltas.append(sent)
        for tc in delta.tool_calls if delta else []:
            if tc.index not in by_index:
                assert tc.id and tc.type == "function", "a call's first delta carries its id and type"
                by_index[tc.index] = Call(tc.id, "", "")
            call = by_index[tc.index]
            call.name += tc.function.name or ""
            call.arguments += tc.function.arguments or ""
        outcome.timeline.append((sent, len(by_index)))
    outcome.content = "".join(outcome.content_deltas) or None
    outcome.calls = [by_index[i] for i in sorted(by_index)]
    return outcome
