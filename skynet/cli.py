"""The `skynet` command. Only this module turns SkynetError into exit codes and one-line messages."""

from __future__ import annotations

import argparse
import sys

from skynet import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skynet", description=__doc__)
    parser.add_argument("--version", action="version", version=f"skynet {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
