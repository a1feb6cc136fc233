"""One exception hierarchy for ctxlab.

Every error says what was wrong, where (``file:line`` when there is a file), and
what to do about it.
"""

from __future__ import annotations


class CtxlabError(Exception):
    """Base class of every error ctxlab raises on purpose."""


class LoadError(CtxlabError):
    """A log file could not be read as the format it claims to be.

    Attributes:
        path: the file, when known.
        line: 1-based line number (or record number for JSON documents), when known.
        reason: what was wrong.
    """

    def __init__(self, reason: str, *, path: str | None = None, line: int | None = None,
                 where: str | None = None) -> None:
        self.path = path
        self.line = line
        self.where = where
        self.reason = reason
        loc = path or "<input>"
        if line is not None:
            loc = f"{loc}:{line}"
        if where:
            loc = f"{loc} ({where})"
        super().__init__(f"{loc}: {reason}")

    def __reduce__(self) -> tuple:
        # rebuilt from its parts, not from its message: an error raised in a worker
        # process reads the same in the parent (not "<input>: <path>: ...")
        return _load_error, (type(self), self.reason, self.path, self.line, self.where)


def _load_error(cls: type[LoadError], reason: str, path: str | None, line: int | None,
                where: str | None) -> LoadError:
    return cls(reason, path=path, line=line, where=where)


class SchemaError(CtxlabError):
    """A frame does not match the declared columns; lists every problem at once."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        body = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} schema problem(s):\n{body}")


class ConfigError(CtxlabError):
    """A name, option or value given by the user is not valid."""
