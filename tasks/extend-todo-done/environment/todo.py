import json
import os
import sys

FILE = "todo.json"


def load():
    if not os.path.exists(FILE):
        return []
    with open(FILE) as f:
        return json.load(f)


def save(items):
    with open(FILE, "w") as f:
        json.dump(items, f)


def main(args):
    items = load()
    if args[:1] == ["add"]:
        items.append({"text": " ".join(args[1:])})
        save(items)
    elif args[:1] == ["list"]:
        for i, item in enumerate(items, 1):
            print(f"{i}. [ ] {item['text']}")
    else:
        print("usage: todo.py add TEXT | list", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
