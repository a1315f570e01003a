"""vLLM tool parser for what small Qwen2.5-Coder models actually write.

Through Qwen's own chat template the 0.5B writes its calls as fenced or bare JSON in the content, and
only now and then inside Qwen's native ``<tool_call>`` tags, so the ``hermes`` parser finds none. This
parser accepts all three shapes, but only for a tool the request declares: any other JSON stays content.

Loaded per server (the same parser for the base model and every adapter):
``--tool-parser-plugin infra/vllm/bridle_tool_parser.py --tool-call-parser bridle --enable-auto-tool-choice``

Each call id names its format (``call_tagged_…``, ``call_fenced_…``, ``call_bare_…``) so that callers can
count formats. Text around calls stays content; an output without calls is left exactly as it is.

End of stream: the parser declares ``engine_based_streaming``, so vLLM's ``DelegatingParser`` calls
``finish_streaming()`` on the generation's last delta; that releases whatever text was held back because
it might have opened a call. In that mode vLLM hands over only the new delta text (``previous_text`` is
empty), which is all this parser reads. vLLM's own JSON streaming for ``tool_choice="required"`` or a
named tool relies on the accumulated text, so ``supports_required_and_named`` is off: those choices are
parsed like ``auto`` (a named choice accepts only that tool) and get no guided JSON decoding.

One file on purpose, past the house's usual size: vLLM imports a plugin as a single file by its path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.tool_parsers.abstract_tool_parser import ToolParser, ToolParserManager
from vllm.utils import random_uuid

TAG_OPEN = "<tool_call>"
TAG_CLOSE = "</tool_call>"
FENCE = "```"
_WHITESPACE = " \t\r\n"
_PENDING = -1
_INVALID = -2
_OPENER_OF = {"}": "{", "]": "["}


@dataclass(frozen=True)
class ParsedCall:
    index: int
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Calls:
    fmt: str
    calls: list[tuple[str, str]]  # (name, arguments JSON)


Event = Text | Calls


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WHITESPACE:
        i += 1
    return i


def _tail_overlap(text: str, marker: str) -> int:
    """Length of the longest proper prefix of `marker` that ends `text`."""
    for k in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:k]):
            return k
    return 0


class _JsonSpan:
    """Finds where the JSON value opened at `start` closes, resuming where the previous look stopped."""

    def __init__(self, start: int) -> None:
        self.start = start
        self._i = start
        self._stack: list[str] = []
        self._in_string = False
        self._escaped = False

    def end_in(self, text: str) -> int:
        """The index just past the value, `_PENDING` while it is still open, `_INVALID` on a mismatch."""
        i = self._i
        while i < len(text):
            c = text[i]
            i += 1
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif c == "\\":
                    self._escaped = True
                elif c == '"':
                    self._in_string = False
            elif c == '"':
                self._in_string = True
            elif c in "{[":
                self._stack.append(c)
            elif c in "}]":
                if not self._stack or self._stack.pop() != _OPENER_OF[c]:
                    return _INVALID
                if not self._stack:
                    return i
        self._i = i
        return _PENDING


def as_calls(value: object, declared: frozenset[str]) -> list[tuple[str, str]] | None:
    """The (name, arguments JSON) of each call in a decoded value, or None when it is not all calls."""
    items = value if isinstance(value, list) else [value]
    calls = [_as_call(item, declared) for item in items]
    if not calls or any(call is None for call in calls):
        return None
    return [call for call in calls if call is not None]


def _as_call(item: object, declared: frozenset[str]) -> tuple[str, str] | None:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or item["name"] not in declared:
        return None
    arguments = item.get("arguments", item.get("parameters"))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return item["name"], json.dumps(arguments, ensure_ascii=False)


class CallScanner:
    """Splits model output, fed in pieces, into text and calls; holds back what may still open a call."""

    def __init__(self, declared: frozenset[str]) -> None:
        self.declared = declared
        self._buf = ""
        self._pos = 0
        self._in_plain_fence = False
        self._span: _JsonSpan | None = None

    def feed(self, text: str, final: bool = False) -> list[Event]:
        self._buf += text
        events: list[Event] = []
        while self._pos < len(self._buf) and (event := self._step(final)) is not None:
            events.append(event)
        return events

    def _text(self, end: int) -> Event:
        text, self._pos = self._buf[self._pos : end], end
        return Text(text)

    def _calls(self, fmt: str, calls: list[tuple[str, str]], end: int) -> Event:
        self._pos = end
        return Calls(fmt, calls)

    def _releasable_end(self, final: bool, *markers: str) -> int:
        if final:
            return len(self._buf)
        tail = self._buf[self._pos :]
        return len(self._buf) - max(_tail_overlap(tail, marker) for marker in markers)

    def _step(self, final: bool) -> Event | None:
        buf, pos = self._buf, self._pos
        if self._in_plain_fence:
            close = buf.find(FENCE, pos)
            if close == -1:
                end = self._releasable_end(final, FENCE)
                return self._text(end) if end > pos else None
            self._in_plain_fence = False
            return self._text(close + len(FENCE))
        starts = [i for i in (buf.find(m, pos) for m in (TAG_OPEN, FENCE, "{", "[")) if i != -1]
        if not starts:
            end = self._releasable_end(final, TAG_OPEN, FENCE)
            return self._text(end) if end > pos else None
        if min(starts) > pos:
            return self._text(min(starts))
        if buf.startswith(TAG_OPEN, pos):
            return self._tagged(final)
        if buf.startswith(FENCE, pos):
            return self._fenced(final)
        return self._bare(final)

    def _json_at(self, start: int) -> tuple[int, list[tuple[str, str]] | None] | int:
        """(end, calls or None) for the JSON value at `start`, or `_PENDING` / `_INVALID`."""
        if self._span is None or self._span.start != start:
            self._span = _JsonSpan(start)
        end = self._span.end_in(self._buf)
        if end == _PENDING:
            return end
        self._span = None
        if end == _INVALID:
            return end
        try:
            value = json.loads(self._buf[start:end])
        except (ValueError, RecursionError):
            return _INVALID
        return end, as_calls(value, self.declared)

    def _closed_by(self, marker: str, at: int) -> bool | None:
        """Whether `marker` follows at `at`; None while the text so far could still become it."""
        rest = self._buf[at : at + len(marker)]
        if rest == marker:
            return True
        return None if at + len(rest) == len(self._buf) and marker.startswith(rest) else False

    def _tagged(self, final: bool) -> Event | None:
        as_text = self._pos + len(TAG_OPEN)
        start = _skip_ws(self._buf, as_text)
        if start == len(self._buf):
            return self._text(as_text) if final else None
        found = self._json_at(start) if self._buf[start] in "{[" else _INVALID
        if found == _PENDING and not final:
            return None
        if isinstance(found, int) or found[1] is None:
            return self._text(as_text)
        end, calls = found
        after = _skip_ws(self._buf, end)
        closed = self._closed_by(TAG_CLOSE, after)
        if closed:
            return self._calls("tagged", calls, after + len(TAG_CLOSE))
        if closed is None:
            # The closing tag has not come yet; at the end of the output it never will.
            return self._calls("tagged", calls, len(self._buf)) if final else None
        return self._calls("tagged", calls, end)

    def _fenced(self, final: bool) -> Event | None:
        buf = self._buf
        info_end = self._pos + len(FENCE)
        while info_end < len(buf) and (buf[info_end].isalnum() or buf[info_end] in "_+-."):
            info_end += 1
        calls: list[tuple[str, str]] = []
        at = info_end
        while True:
            at = _skip_ws(buf, at)
            closed = self._closed_by(FENCE, at) if calls else False
            if closed:
                return self._calls("fenced", calls, at + len(FENCE))
            if at == len(buf) or closed is None:
                if not final:
                    return None
                break
            found = self._json_at(at) if buf[at] in "{[" else _INVALID
            if found == _PENDING and not final:
                return None
            if isinstance(found, int) or found[1] is None:
                calls = []
                break
            at, more = found
            calls.extend(more)
        if calls:
            # The output ended after a complete call, before the closing fence.
            return self._calls("fenced", calls, len(buf))
        self._in_plain_fence = True
        return self._text(info_end)

    def _bare(self, final: bool) -> Event | None:
        buf, pos = self._buf, self._pos
        # A call opens with `{"` or `[{"`: anything else is prose or code, released at once.
        at = _skip_ws(buf, pos + 1)
        if buf[pos] == "[" and at < len(buf):
            at = _skip_ws(buf, at + 1) if buf[at] == "{" else -1
        if at == len(buf):
            return self._text(pos + 1) if final else None
        if at == -1 or buf[at] != '"':
            return self._text(pos + 1)
        found = self._json_at(pos)
        if found == _PENDING and not final:
            return None
        if isinstance(found, int):
            return self._text(pos + 1)
        end, calls = found
        return self._text(end) if calls is None else self._calls("bare", calls, end)


class CallStream:
    """Model output in, content and numbered calls out; the same path serves whole and streamed output.

    Whitespace is dropped only where it would start or end the content next to a call; between two
    pieces of text it stays, so an output without calls comes out exactly as it went in.
    """

    def __init__(self, declared: frozenset[str]) -> None:
        self._scanner = CallScanner(declared)
        self._calls = 0
        self._held_ws = ""
        self._sent_text = False
        self._last_was_call = False

    def push(self, text: str, final: bool = False) -> tuple[str, list[ParsedCall]]:
        content: list[str] = []
        calls: list[ParsedCall] = []
        for event in self._scanner.feed(text, final):
            if isinstance(event, Text):
                content.append(self._content(event.text))
                continue
            self._last_was_call = True
            for name, arguments in event.calls:
                calls.append(ParsedCall(self._calls, f"call_{event.fmt}_{random_uuid()}", name, arguments))
                self._calls += 1
        if final and not self._last_was_call:
            content.append(self._held_ws)
        if final:
            self._held_ws = ""
        return "".join(content), calls

    def _content(self, text: str) -> str:
        """Text to send now; trailing whitespace waits to see what follows it."""
        text = self._held_ws + text
        if self._calls and not self._sent_text:
            text = text.lstrip(_WHITESPACE)
        body = text.rstrip(_WHITESPACE)
        self._held_ws = text[len(body) :]
        if body:
            self._sent_text, self._last_was_call = True, False
        return body


def _declared_names(request: Any) -> frozenset[str]:
    """The tools a call may name: the declared ones, or only the one a named tool choice forces."""
    if not request.tools or request.tool_choice == "none":
        return frozenset()
    names = {getattr(getattr(tool, "function", tool), "name", None) for tool in request.tools}
    forced = getattr(request.tool_choice, "function", None) or request.tool_choice
    forced_name = getattr(forced, "name", None)
    names.discard(None)
    return frozenset({forced_name} & names if isinstance(forced_name, str) else names)


class BridleToolParser(ToolParser):
    supports_required_and_named = False
    engine_based_streaming = True

    def __init__(self, tokenizer: Any, tools: list[Any] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self._stream: CallStream | None = None

    def extract_tool_calls(
        self, model_output: str, request: ChatCompletionRequest
    ) -> ExtractedToolCallInformation:
        declared = _declared_names(request)
        if not declared:
            return ExtractedToolCallInformation(tools_called=False, tool_calls=[], content=model_output)
        content, calls = CallStream(declared).push(model_output, final=True)
        if not calls:
            return ExtractedToolCallInformation(tools_called=False, tool_calls=[], content=model_output)
        tool_calls = [
            ToolCall(id=c.id, type="function", function=FunctionCall(name=c.name, arguments=c.arguments))
            for c in calls
        ]
        return ExtractedToolCallInformation(tools_called=True, tool_calls=tool_calls, content=content or None)

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: ChatCompletionRequest,
    ) -> DeltaMessage | None:
        if self._stream is None:
            declared = _declared_names(request)
            if not declared:
                return DeltaMessage(content=delta_text) if delta_text else None
            self._stream = CallStream(declared)
        return self._delta(*self._stream.push(delta_text))

    def finish_streaming(self) -> DeltaMessage | None:
        """Called by vLLM on the last delta of a generation: resolves or releases held text."""
        if self._stream is None:
            return None
        return self._delta(*self._stream.push("", final=True))

    def _delta(self, content: str, calls: list[ParsedCall]) -> DeltaMessage | None:
        for call in calls:
            # vLLM appends "unstreamed" arguments at the end by comparing these two; keep them equal.
            self.prev_tool_call_arr.append({"name": call.name, "arguments": call.arguments})
            self.streamed_args_for_tool.append(call.arguments)
            self.current_tool_id = call.index
        if not content and not calls:
            return None
        tool_calls = [
            DeltaToolCall(
                index=c.index,
                id=c.id,
                type="function",
                function=DeltaFunctionCall(name=c.name, arguments=c.arguments),
            )
            for c in calls
        ]
        return DeltaMessage(content=content or None, tool_calls=tool_calls)


ToolParserManager.register_module("bridle", module=BridleToolParser)
