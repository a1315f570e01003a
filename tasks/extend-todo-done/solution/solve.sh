#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 - <<'PY'
src = open("todo.py").read()
src = src.replace('''            print(f"{i}. [ ] {item['text']}")''', '''            print(f"{i}. [{'x' if item.get('done') else ' '}] {item['text']}")
    elif args[:1] == ["done"] and len(args) == 2:
        n = int(args[1]) if args[1].isdigit() else 0
        if not 1 <= n <= len(items):
            print(f"no item {args[1]}", file=sys.stderr)
            return 1
        items[n - 1]["done"] = True
        save(items)''')
open("todo.py", "w").write(src)
PY
