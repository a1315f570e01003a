#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 - <<'PY'
src = open("stack.py").read()
src = src.replace('''        return self._items.pop()''', '''        if not self._items:
            raise EmptyStack()
        self._size -= 1
        return self._items.pop()''')
src = src.replace("return self._items[0]", "return self._items[-1]")
open("stack.py", "w").write(src)
PY
