"""Nightly export of orders to a compressed CSV file."""

import os


def export(rows: list[list[str]], path: str) -> None:
    """Write rows as CSV to `path`, then compress it."""
    out = open(path, "w")
    for row in rows:
        out.write(",".join(row) + "\n")
    out.close()
    os.system("gzip -f " + path)
