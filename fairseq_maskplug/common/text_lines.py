"""Lines of a UTF-8 text file, where a byte that is not UTF-8 is named with its file, line and offset (Python's
own error names a position in a buffer, and no file among several inputs)."""

from typing import Iterator

#: every character str.splitlines ends a line at: a reader that splits there would see other lines
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def utf8_lines(path) -> Iterator[str]:
    """The lines of ``path`` (with their line ends), or a ValueError ``PATH:LINE: not UTF-8 text (REASON at byte
    B of the line, byte F of the file)`` at the first undecodable byte; read line by line, so a line of any length
    that decodes is never held twice."""
    offset = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{path}:{number}: not UTF-8 text ({error.reason} at byte {error.start} of the line, "
                                 f"byte {offset + error.start} of the file)") from None
            offset += len(raw)
