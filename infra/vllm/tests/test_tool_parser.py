"""The bridle tool parser, run inside vLLM's own chat parser with the embedded model's tokenizer."""

from __future__ import annotations

import json

import pytest
from chat import CHUNKINGS, chat_request, parse_stream, parse_whole

WRITE_ARGS = {"path": "hello.txt", "content": "Hello"}
WRITE = json.dumps({"name": "write", "arguments": WRITE_ARGS})
BASH = json.dumps({"name": "bash", "arguments": {"command": "cat hello.txt"}})
NOT_A_CALL = '{"path": "hello.txt", "content": "Hello"}'

# What the model writes -> (content, [(format, tool, arguments)]) a client receives.
OUTPUTS = {
    "a native <tool_call> tag": (
        f"<tool_call>\n{WRITE}\n</tool_call>",
        None,
        [("tagged", "write", WRITE_ARGS)],
    ),
    "two native tags": (
        f"<tool_call>\n{WRITE}\n</tool_call>\n<tool_call>\n{BASH}\n</tool_call>",
        None,
        [("tagged", "write", WRITE_ARGS), ("tagged", "bash", {"command": "cat hello.txt"})],
    ),
    "a ```json fence": (f"```json\n{WRITE}\n```", None, [("fenced", "write", WRITE_ARGS)]),
    "a bare ``` fence": (f"```\n{WRITE}\n```", None, [("fenced", "write", WRITE_ARGS)]),
    "a bare object": (WRITE, None, [("bare", "write", WRITE_ARGS)]),
    "a bare list of calls": (
        f"[{WRITE}, {BASH}]",
        None,
        [("bare", "write", WRITE_ARGS), ("bare", "bash", {"command": "cat hello.txt"})],
    ),
    "a fenced list of calls": (
        f"```json\n[\n  {WRITE},\n  {BASH}\n]\n```",
        None,
        [("fenced", "write", WRITE_ARGS), ("fenced", "bash", {"command": "cat hello.txt"})],
    ),
    "text around a fenced call": (
        f"I will create the file.\n```json\n{WRITE}\n```\nThen check it with `cat`.",
        "I will create the file.\n\nThen check it with `cat`.",
        [("fenced", "write", WRITE_ARGS)],
    ),
    "text before a bare call": (
        f"Sure! Here is the call: {WRITE}",
        "Sure! Here is the call:",
        [("bare", "write", WRITE_ARGS)],
    ),
    "arguments as a JSON string": (
        json.dumps({"name": "write", "arguments": json.dumps(WRITE_ARGS)}),
        None,
        [("bare", "write", WRITE_ARGS)],
    ),
    '"parameters" instead of "arguments"': (
        f"```json\n{json.dumps({'name': 'write', 'parameters': WRITE_ARGS})}\n```",
        None,
        [("fenced", "write", WRITE_ARGS)],
    ),
    "file content that holds a code fence": (
        "```json\n"
        + json.dumps({"name": "write", "arguments": {"path": "README.md", "content": "```sh\nls\n```\n"}})
        + "\n```",
        None,
        [("fenced", "write", {"path": "README.md", "content": "```sh\nls\n```\n"})],
    ),
    "a JSON object that is not a call": (
        f"The file will hold:\n```json\n{NOT_A_CALL}\n```\nand {NOT_A_CALL} too.",
        f"The file will hold:\n```json\n{NOT_A_CALL}\n```\nand {NOT_A_CALL} too.",
        [],
    ),
    "a call to an undeclared tool": (
        '```json\n{"name": "run_tests", "arguments": {"path": "."}}\n```',
        '```json\n{"name": "run_tests", "arguments": {"path": "."}}\n```',
        [],
    ),
    "a list with one undeclared tool": (
        f'[{WRITE}, {{"name": "median", "arguments": {{}}}}]',
        f'[{WRITE}, {{"name": "median", "arguments": {{}}}}]',
        [],
    ),
    "invalid JSON": (
        '<tool_call>\n{"name": "write", "arguments": {"path": "hello.txt",}}\n</tool_call>\n'
        '```json\n{"name": "write", "arguments": {path: hello.txt}}\n```',
        '<tool_call>\n{"name": "write", "arguments": {"path": "hello.txt",}}\n</tool_call>\n'
        '```json\n{"name": "write", "arguments": {path: hello.txt}}\n```',
        [],
    ),
    "arguments that are a string but not JSON": (
        '{"name": "bash", "arguments": "ls -la"}',
        '{"name": "bash", "arguments": "ls -la"}',
        [],
    ),
    "a plain answer with code": (
        "Use this:\n```python\ndef f(x):\n    return {'a': [x]}\n```\n[1] see {docs}.\n",
        "Use this:\n```python\ndef f(x):\n    return {'a': [x]}\n```\n[1] see {docs}.\n",
        [],
    ),
}


@pytest.mark.parametrize("output", OUTPUTS.values(), ids=OUTPUTS.keys())
def test_a_whole_response_carries_the_calls_the_model_wrote(parser_cls, tokenizer, output):
    text, content, calls = output
    assert parse_whole(parser_cls, tokenizer, text).summary() == (content, calls)


@pytest.mark.parametrize("chunking", CHUNKINGS.values(), ids=CHUNKINGS.keys())
@pytest.mark.parametrize("output", OUTPUTS.values(), ids=OUTPUTS.keys())
def test_a_streamed_response_carries_the_same_calls_and_content(parser_cls, tokenizer, output, chunking):
    text, content, calls = output
    pieces = chunking(tokenizer, text)
    assert len(pieces) > 3
    assert parse_stream(parser_cls, tokenizer, pieces).summary() == (content, calls)


def test_call_ids_are_unique_and_name_their_format(parser_cls, tokenizer):
    text = f"<tool_call>{WRITE}</tool_call>\n```json\n{BASH}\n```\n{WRITE}"
    calls = parse_whole(parser_cls, tokenizer, text).calls
    assert [call.id.rsplit("_", 1)[0] for call in calls] == ["call_tagged", "call_fenced", "call_bare"]
    assert all(len(call.id.rsplit("_", 1)[1]) == 16 for call in calls)
    assert len({call.id for call in calls}) == 3


@pytest.mark.parametrize("chunking", CHUNKINGS.values(), ids=CHUNKINGS.keys())
def test_text_before_a_call_streams_before_the_call_is_complete(parser_cls, tokenizer, chunking):
    intro = "I will create the file hello.txt now, with the write tool."
    outcome = parse_stream(parser_cls, tokenizer, chunking(tokenizer, f"{intro}\n```json\n{WRITE}\n```"))
    sent_before_call = "".join(sent for sent, calls in outcome.timeline if calls == 0)
    assert sent_before_call == intro
    assert len([sent for sent, _ in outcome.timeline if sent]) > 3


def test_a_plain_answer_streams_as_it_comes(parser_cls, tokenizer):
    text = "Hello! I can help you write files, run commands and read code. What do you need?"
    outcome = parse_stream(parser_cls, tokenizer, CHUNKINGS["one token at a time"](tokenizer, text))
    held = [sent for sent, _ in outcome.timeline[:-1] if not sent]
    # Only the tokens that end in whitespace wait for the next one.
    assert len(held) <= text.count(" ") // 2
    assert outcome.content == text and outcome.calls == []


CUT_OFF = {
    "inside a native tag": f"<tool_call>\n{WRITE[:30]}",
    "inside a fence": f"Creating it.\n```json\n{WRITE[:-3]}",
    "inside a bare object": f"Creating it: {WRITE[:-1]}",
    "between a complete call and its closing tag": f"<tool_call>\n{WRITE}\n</tool",
}


@pytest.mark.parametrize("text", CUT_OFF.values(), ids=CUT_OFF.keys())
def test_a_stream_cut_off_in_a_call_gives_its_text_as_content(parser_cls, tokenizer, text):
    pieces = CHUNKINGS["a few tokens at a time"](tokenizer, text)
    outcome = parse_stream(parser_cls, tokenizer, pieces, cut_off=True)
    if text.endswith("</tool"):
        # The call itself was complete: it is kept, and the broken tag is not content.
        assert outcome.summary() == (None, [("tagged", "write", WRITE_ARGS)])
    else:
        assert outcome.summary() == (text, [])
    assert outcome.summary() == parse_whole(parser_cls, tokenizer, text).summary()


def test_with_tool_choice_none_a_call_stays_text(parser_cls, tokenizer):
    text = f"```json\n{WRITE}\n```"
    request = chat_request(tool_choice="none")
    assert parse_whole(parser_cls, tokenizer, text, request).summary() == (text, [])
    pieces = CHUNKINGS["odd character runs"](tokenizer, text)
    assert parse_stream(parser_cls, tokenizer, pieces, request).summary() == (text, [])


def test_a_named_tool_choice_accepts_only_that_tool(parser_cls, tokenizer):
    request = chat_request(tool_choice={"type": "function", "function": {"name": "bash"}})
    text = f"{WRITE}\n{BASH}"
    assert parse_whole(parser_cls, tokenizer, text, request).summary() == (
        WRITE,
        [("bare", "bash", {"command": "cat hello.txt"})],
    )
