import sys

OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
}


def evaluate(expression):
    a, op, b = expression.split()
    return OPS[op](float(a), float(b))


def show(value):
    return str(int(value)) if float(value).is_integer() else str(value)


if __name__ == "__main__":
    try:
        print(show(evaluate(sys.argv[1])))
    except ZeroDivisionError:
        print("error: division by zero", file=sys.stderr)
        sys.exit(1)
