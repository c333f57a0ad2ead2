"""Errors meshemu reports to its users.

Every error a user can cause derives from `MeshemuError`; the CLI prints it as
one line (or one line per problem) without a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


class MeshemuError(Exception):
    """A mistake or a failure the user must see, phrased for the user."""


@dataclass(frozen=True)
class Problem:
    """One problem in a user file: where it is and what is wrong."""

    file: str
    line: int  # 1-based; 0 when unknown
    column: int  # 1-based; 0 when unknown
    path: str  # dotted path of the field, e.g. "nodes.n3.position"
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.line:
            where += f":{self.line}:{self.column}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class ConfigError(MeshemuError):
    """A user file is invalid; carries every problem found."""

    def __init__(self, problems: list[Problem]):
        unique: list[Problem] = []
        for problem in problems:
            if problem not in unique:
                unique.append(problem)
        # In file order, as a compiler would list them.
        unique.sort(key=lambda p: (p.file, p.line, p.column))
        self.problems = unique
        super().__init__("\n".join(str(p) for p in unique))


class LabError(MeshemuError):
    """A lab could not be brought up, reached or torn down."""


class MediumError(MeshemuError):
    """The medium process is missing, failed or answered with an error."""
