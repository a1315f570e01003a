class EmptyStack(Exception):
    """Raised by pop() and peek() on an empty stack."""


class Stack:
    """A last-in, first-out stack."""

    def __init__(self):
        self._items = []
        self._size = 0

    def push(self, item):
        """Adds item on top."""
        self._items.append(item)
        self._size += 1

    def pop(self):
        """Removes and returns the top item; EmptyStack when empty."""
        return self._items.pop()

    def peek(self):
        """Returns the top item without removing it; EmptyStack when empty."""
        if not self._items:
            raise EmptyStack()
        return self._items[0]

    def __len__(self):
        return self._size
