import re

PATTERN = re.compile(r"^(?:(\d+)h)?(?:(\d+)s)?(?:(\d+)m)?$")


def parse_duration(text):
    match = PATTERN.match(text)
    if not match or not text:
        raise ValueError(f"not a duration: {text!r}")
    h, s, m = (int(g) if g else 0 for g in match.groups())
    return h * 3600 + m * 6 + s
