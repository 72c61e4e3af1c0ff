"""Ahead-of-time work: kjit.warmup (load variants in this process before a CUDA-graph capture),
and kjit.tune / kjit.prebuild (the `kjit tune` and `kjit prebuild` commands)."""

from . import _cli, _core


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
    """`kjit tune TEMPLATE --shapes FILE [--budget S] [--space K=V,...]`: its JSON report."""
    space_flags = [item for value in space for item in ("--space", value)]
    return _cli.run_json(["tune", template, "--shapes", shapes_file,
                          *_cli.flags(budget=budget), *space_flags])


def prebuild(targets=None, level=None, sets=(), out=None, jobs=None):
    """`kjit prebuild` into a prebuilt tier (KJIT_PREBUILT_DIR, or `out`): its JSON report."""
    set_flags = [item for path in sets for item in ("--sets", path)]
    return _cli.run_json(["prebuild", *_cli.flags(targets=targets, level=level, out=out,
                                                  jobs=jobs), *set_flags])
