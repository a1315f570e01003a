import json
import sys


def rows(path="stock.json"):
    with open(path) as f:
        stock = json.load(f)
    return sorted(stock.items())


def main(argv):
    for name, qty in rows():
        print(f"{name}: {qty}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
