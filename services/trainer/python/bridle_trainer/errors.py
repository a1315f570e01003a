"""Errors the worker reports to its service with an HTTP-like status and a stable code."""


class StepError(Exception):
    """A request the trainer refuses or cannot complete; `status` follows HTTP conventions."""

    def __init__(self, status: int, code: str, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.path = path

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {"status": self.status, "code": self.code, "message": self.message}
        if self.path is not None:
            body["path"] = self.path
        return body


def bad_batch(path: str, message: str) -> StepError:
    """A 400 naming where in the batch the problem is, e.g. `trajectories.0.calls.1.logprobs.3`."""
    return StepError(400, "invalid_batch", f"{path}: {message}", path)
