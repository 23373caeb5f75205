"""`deltamem` command line: the library's calls, one command each, `--json` everywhere.

The commands live by what they do (`write`, `read`, `service`); importing them
registers them on the one `app`, in the order `deltamem --help` lists them."""

from __future__ import annotations

import importlib

from deltamem.cli.base import app

# importing a command module registers its commands, in this order in `--help`
for _module in ("write", "read", "service"):
    importlib.import_module(f"deltamem.cli.{_module}")


def _mount_train() -> None:
    try:
        import scipy  # noqa: F401  (the state distance's assignment; bench extra)
    except ImportError:
        return
    from deltamem.cli.diff import diff
    from deltamem.cli.synth import synth
    from deltamem.cli.train import app as train_app

    app.command()(diff)
    app.command()(synth)
    app.add_typer(train_app, name="train")


def _mount_bench() -> None:
    try:
        from deltamem.bench.cli import app as bench_app
    except ImportError:  # the bench extra (scipy) is not installed
        return
    app.add_typer(bench_app, name="bench", help="Benchmarks: HaluMem, LoCoMo.")


_mount_bench()
_mount_train()


__all__ = ["app"]
