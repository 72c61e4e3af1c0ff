"""Ahead-of-time work: kjit.warmup (load variants in this process before a CUDA-graph capture),
and kjit.tune / kjit.prebuild (what the `kjit tune` and `kjit prebuild` commands do, through the
C ABI)."""

import os

from . import _cli, _core, _native


def warmup(manifest, runtime=None):
    """Compiles or loads every variant of `manifest` in this process, so that a CUDA-graph
    capture that uses them starts no compile. Items are:
      - (template, params): a kernel (loaded by `runtime`, default kjit.default_runtime()),
      - {"op": "rms_norm", "dtype": "bfloat16", "shapes": [[rows, hidden], [hidden]]}: a
        kjit.ops operator at those input shapes, run once on zeros on the current stream,
    which is the item a capture's error names. Returns the kernels of the template items."""
    runtime = runtime or _core.default_runtime()
    kernels = []
    ran_ops = False
    for item in manifest:
        if isinstance(item, dict) and "op" in item:
            from . import ops
            ops.run_manifest_item(item)
            ran_ops = True
        else:
            template, params = item
            kernels.append(runtime.kernel(template, params))
    if ran_ops:
        import torch
        torch.cuda.current_stream().synchronize()
    return kernels


def tune(template, shapes_file, budget=None, space=()):
    """Tunes the operator `template` (rms_norm, softmax, silu_and_mul) at the shapes of the JSON
    file `shapes_file` on the default GPU, as `kjit tune OP --shapes FILE [--budget S] [--space
    K=V,...]` does, in this process (kjit_tune): its JSON report. kjit.NoDevice without a GPU."""
    items, count = _native.texts(space)
    return _native.document("tune", _native.text(template), _native.text(shapes_file),
                            float(budget or 0), items, count)


def prebuild(targets=None, level=None, sets=(), out=None, jobs=None):
    """Compiles sets of variants into a prebuilt tier (KJIT_PREBUILT_DIR, or `out`), as `kjit
    prebuild` does (kjit_prebuild): its JSON report. Parallel jobs are worker processes of the
    `kjit` command where it is found; without it one job builds in this process. Variants that do
    not compile raise kjit.CompileError naming them, with the report as its `report`."""
    try:
        worker = _cli.cli_path()
    except _native.Error:
        worker = None
    if worker is not None and not os.access(worker, os.X_OK):
        worker = None
    items, count = _native.texts(sets)
    report = _native.document("prebuild", _native.text(targets), _native.text(level), items,
                              count, _native.text(out), int(jobs or 0), _native.text(worker))
    if report.get("failed"):
        error = _native.error_class("CompileError")(
            f"kjit.prebuild: {len(report['failed'])} variants not built: "
            f"{', '.join(report['failed'])}")
        error.report = report
        raise error
    return report
