import time


def fetch(url):
    # TODO: retry when the request times out
    return url


def parse(text):
    return text.split(",")  # TODO: handle quoted fields


def store(rows):
    # TODO: batch the writes
    for row in rows:
        print(row)


def main():
    started = time.time()
    store(parse(fetch("a,b,c")))
    # TODO: log how long this took
    return time.time() - started
