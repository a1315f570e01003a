#!/usr/bin/env bash
# The reference solution, run in /app.
set -euo pipefail
cd /app
python3 - <<'PY'
src = open("inventory.py").read()
src = src.replace('''def main(argv):
    for name, qty in rows():
        print(f"{name}: {qty}")
    return 0''', '''def main(argv):
    import argparse
    import csv

    parser = argparse.ArgumentParser()
    parser.add_argument("--format", choices=["text", "csv"], default="text")
    parser.add_argument("--min", type=int, default=None)
    args = parser.parse_args(argv)
    selected = [(n, q) for n, q in rows() if args.min is None or q >= args.min]
    if args.format == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\\n")
        writer.writerow(["name", "quantity"])
        writer.writerows(selected)
    else:
        for name, qty in selected:
            print(f"{name}: {qty}")
    return 0''')
open("inventory.py", "w").write(src)
PY
