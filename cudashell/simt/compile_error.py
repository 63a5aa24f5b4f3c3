"""The one error the front end and the template instantiator raise: a module of its own, so that neither imports
the other for it."""


class CompileError(Exception):
    """A source the front end refused: `code` is USAGE (nvcc would refuse it) or NOT_SUPPORTED_ON_SIM."""

    def __init__(self, code: str, message: str, where: tuple | None = None, hint: str | None = None):
        super().__init__(message)
        self.code, self.message, self.where, self.hint = code, message, where, hint

    def __str__(self) -> str:
        if self.where:
            return f"{self.where[0]}:{self.where[1]}:{self.where[2]}: {self.message}"
        return self.message
