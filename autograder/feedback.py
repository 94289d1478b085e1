"""Feedback that does not leak hidden tests.

During autograding nbgrader restores every test cell from the gradebook, hidden tests included,
so a feedback page rendered from the autograded notebook would show them. :class:`HideHiddenTests`
runs inside ``generate_feedback`` and, in every cell that holds a hidden-test region, replaces the
region with a one-line note and shortens error tracebacks (which quote the failing source line) to
their last line, e.g. ``AssertionError: `weights` should have shape (2, 4, 4) ...``.
"""

from __future__ import annotations

from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode
from traitlets import Bool, Unicode

HIDDEN_NOTE = "# Hidden tests ran here; they are not shown in feedback."


def strip_hidden_region(source: str, begin: str = "BEGIN HIDDEN TESTS",
                        end: str = "END HIDDEN TESTS", note: str = HIDDEN_NOTE) -> tuple[str, bool]:
    """Replace each hidden-test region of a cell's source with ``note``.

    Args:
        source: the cell's source.
        begin: the marker that opens a region (nbgrader's delimiter).
        end: the marker that closes it.
        note: the line left in place of each region.

    Returns:
        ``(new_source, removed)``; ``removed`` says whether any region was found. A region left
        open runs to the end of the cell.
    """
    kept: list[str] = []
    inside = removed = False
    for line in source.split("\n"):
        if begin in line:
            inside = removed = True
            indent = line[: len(line) - len(line.lstrip())]
            kept.append(indent + note)
        elif end in line:
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join(kept), removed


class HideHiddenTests(Preprocessor):
    """nbconvert preprocessor: remove hidden tests and their tracebacks from feedback."""

    enabled = Bool(True, help="Whether to hide hidden tests").tag(config=True)

    # nbgrader spells these "delimeter"; the same names keep one config key for both preprocessors.
    begin_test_delimeter = Unicode("BEGIN HIDDEN TESTS", help="Opens a hidden region").tag(config=True)
    end_test_delimeter = Unicode("END HIDDEN TESTS", help="Closes a hidden region").tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int) -> tuple[NotebookNode, dict]:
        """Strip the hidden region of one cell and shorten its error tracebacks."""
        if cell.cell_type != "code":
            return cell, resources
        cell.source, removed = strip_hidden_region(cell.source, self.begin_test_delimeter,
                                                   self.end_test_delimeter)
        if removed:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources
