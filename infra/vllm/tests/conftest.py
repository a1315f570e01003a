"""Loads the plugin the way the server does and composes vLLM's real parser around it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
PLUGIN = HERE.parent / "bridle_tool_parser.py"
# The embedded model first; the bootstrap's SmolLM2 stands in until it is there.
MODEL_NAMES = ("qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct")


def model_dir() -> Path:
    """BRIDLE_TOOL_PARSER_MODEL names a model folder; otherwise the first model found in BRIDLE_HOME."""
    if explicit := os.environ.get("BRIDLE_TOOL_PARSER_MODEL"):
        return Path(explicit)
    models = Path(os.environ.get("BRIDLE_HOME", REPO / ".bridle")) / "models"
    for name in MODEL_NAMES:
        if (models / name / "tokenizer.json").is_file():
            return models / name
    raise pytest.UsageError(
        f"no model tokenizer in {models} (looked for {', '.join(MODEL_NAMES)}): run ./bridle install, "
        "or set BRIDLE_TOOL_PARSER_MODEL to a model folder"
    )


@pytest.fixture(scope="session")
def tokenizer():
    from vllm.tokenizers import get_tokenizer

    return get_tokenizer(str(model_dir()))


@pytest.fixture(scope="session")
def parser_cls(tokenizer):
    """The Parser class vLLM's chat serving builds for `--tool-call-parser bridle`."""
    from vllm.parser.parser_manager import ParserManager
    from vllm.tool_parsers import ToolParserManager

    ToolParserManager.import_tool_parser(str(PLUGIN))
    return ParserManager.get_parser(tool_parser_name="bridle", enable_auto_tools=True, tokenizer=tokenizer)
