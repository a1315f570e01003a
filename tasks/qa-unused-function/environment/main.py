from lib.numbers import sextuple
from lib.text import mumble, shout

print(shout('hi'), mumble('HELLO'), sextuple(2))
