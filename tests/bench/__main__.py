"""`python -m tests.bench`: every benchmark module in this package, one after the other.

A benchmark is a module here with a `main()` or `main(argv)` returning an exit status (each
runs with its defaults); `make bench` runs this.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path


def main() -> int:
    status = 0
    for module in sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])):
        if module.startswith("_"):
            continue
        bench = importlib.import_module(f"tests.bench.{module}")
        if hasattr(bench, "main"):
            print(f"### tests.bench.{module}", flush=True)
            takes_argv = bool(inspect.signature(bench.main).parameters)
            status |= int((bench.main([]) if takes_argv else bench.main()) or 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
