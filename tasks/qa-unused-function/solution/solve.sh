#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 - <<'PY'
import ast
import pathlib
defined, called = set(), set()
for path in pathlib.Path(".").rglob("*.py"):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef):
            defined.add(node.name)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.add(node.func.id)
(unused,) = defined - called
open("answer.txt", "w").write(unused + "\n")
PY
