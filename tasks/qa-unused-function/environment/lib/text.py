def shout(s):
    return s.upper() + '!'


def whisper(s):
    return s.lower()


def mumble(s):
    return whisper(s)[:3]
