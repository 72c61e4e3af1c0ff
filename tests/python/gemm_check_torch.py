#!/usr/bin/env python3
"""Checks kjit's big GEMM products against torch's fp32 matmul on the GPU (issue 17, item 5).

usage: gemm_check_torch.py DIR       checks every case DIR/*.json that kjit_ops_gpu_tests'
                                     BigRaggedProductsAreDumpedForTheTorchCheck wrote with
                                     KJIT_GEMM_DUMP_DIR=DIR (tools/gpu-check --run runs both)
       gemm_check_torch.py --self-test
                                     checks the checker on small synthetic dumps, with numpy's
                                     fp64 product on the CPU as the reference

A case is {"case", "dtype": "bfloat16" | "half", "m", "n", "k", "b_layout", "a", "b", "c"}: raw
little-endian files of A [m, k], B and C [m, n], all row-major; B is [k, n] for gemm() ("k_by_n",
C = A @ B) or [n, k] for linear() ("n_by_k", C = A @ B^T, torch's weight layout).

Each element must satisfy |c - ref| <= k * 2^-22 * (|A| @ |B|) + eps * |ref|. Why: a product of
two bfloat16 or half values is exact in fp32 (16 or 22 significant bits of 24), so kjit's C
before its rounding and torch's fp32 result are both fp32 sums of the same k exact products, each
off the exact sum by at most k * 2^-24 * sum|a||b|; then kjit rounds to its type, by at most half
of eps (2^-7 for bfloat16, 2^-10 for half) times |c|. Both terms are taken twice, as margin. NaN
(the test's poison, 0xFFFF) fails any bound.

Exit: 0 every case within the bound; 1 a violation, poison left, a missing file or no case at
all; 0 printing "no result: REASON" where torch or a CUDA GPU is missing or the dump test skipped.
--self-test: 0 passed, 1 failed, 77 numpy missing (ctest's skip).
"""
import json
import os
import sys
import tempfile

EPSILON = {"bfloat16": 2.0**-7, "half": 2.0**-10}
ACCUMULATION_SLACK = 2.0**-22  # per product: twice the sum of both fp32 accumulations' 2^-24


def no_result(reason):
    print(f"no result: {reason}")
    return 0


def load_as_float32(path, dtype, count):
    """The raw file's `count` elements as a float32 numpy array, exactly (both types widen)."""
    import numpy as np

    bits = np.fromfile(path, dtype="<u2")
    if bits.size != count:
        raise ValueError(f"{path} holds {bits.size} elements, expected {count}")
    if dtype == "half":
        return bits.view("<f2").astype(np.float32)
    # bfloat16 is the high half of a float32.
    return (bits.astype(np.uint32) << 16).view(np.float32)


def within_bound(xp, c, ref, magnitude, k, dtype):
    """Counts the elements of c off the bound around ref and measures the rest; xp is the array
    module of c, ref and magnitude (numpy or torch: both spell these operations alike)."""
    error = abs(c - ref)
    bound = k * ACCUMULATION_SLACK * magnitude + EPSILON[dtype] * abs(ref)
    left_poison = c != c
    zero = xp.zeros_like(error)
    finite_error = xp.where(left_poison, zero, error)
    over_bound = xp.where(bound > 0, finite_error / bound, zero)
    return {
        "violations": int((~(error <= bound)).sum()),  # NaN is never within
        "poison": int(left_poison.sum()),
        "max_abs_error": float(finite_error.max()),
        "worst_error_over_bound": float(over_bound.max()),
        "mean_abs_ref": float(abs(ref).mean()),
    }


def torch_cuda_reference():
    """(product, description): the reference in fp32 on the GPU with TF32 off, or (None, why)."""
    try:
        import torch
    except ImportError as error:
        return None, f"torch is missing ({error})"
    if not torch.cuda.is_available():
        return None, "torch sees no CUDA GPU"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    def product(a, b, c):
        a, b, c = (torch.from_numpy(x).cuda() for x in (a, b, c))
        return torch, c, a @ b, a.abs() @ b.abs()

    return product, f"torch {torch.__version__} fp32 matmul on {torch.cuda.get_device_name()}"


def numpy_fp64_product(a, b, c):
    import numpy as np

    a, b = a.astype(np.float64), b.astype(np.float64)
    return np, c.astype(np.float64), a @ b, abs(a) @ abs(b)


def check_case(directory, header, product):
    m, n, k, dtype = header["m"], header["n"], header["k"], header["dtype"]
    if dtype not in EPSILON:
        raise ValueError(f"unknown dtype {dtype!r}")
    a = load_as_float32(os.path.join(directory, header["a"]), dtype, m * k).reshape(m, k)
    b = load_as_float32(os.path.join(directory, header["b"]), dtype, k * n)
    if header["b_layout"] == "k_by_n":
        b = b.reshape(k, n)
    elif header["b_layout"] == "n_by_k":
        b = b.reshape(n, k).T
    else:
        raise ValueError(f"unknown b_layout {header['b_layout']!r}")
    c = load_as_float32(os.path.join(directory, header["c"]), dtype, m * n).reshape(m, n)
    xp, c, ref, magnitude = product(a, b, c)
    return within_bound(xp, c, ref, magnitude, k, dtype)


def check_directory(directory, product, description):
    """Checks every case in `directory`; the exit status (0 or 1)."""
    skipped = os.path.join(directory, "SKIPPED")
    if os.path.exists(skipped):
        with open(skipped) as reason:
            return no_result(f"the dump test skipped: {reason.read().strip()}")
    names = sorted(name for name in os.listdir(directory) if name.endswith(".json"))
    if not names:
        print(f"gemm_check_torch: no case in {directory}: the dump test wrote nothing")
        return 1
    print(f"gemm_check_torch: {len(names)} cases against {description}")
    failed = 0
    for name in names:
        with open(os.path.join(directory, name)) as file:
            header = json.load(file)
        try:
            result = check_case(directory, header, product)
        except (OSError, ValueError, KeyError) as error:
            print(f"{name}: FAILED, unreadable: {error}")
            failed += 1
            continue
        verdict = "ok" if result["violations"] == 0 and result["poison"] == 0 else "FAILED"
        failed += verdict != "ok"
        print(
            f"{header['case']}: {verdict}, {result['violations']} of {header['m'] * header['n']} "
            f"off the bound, {result['poison']} NaN, max |c - ref| {result['max_abs_error']:.4g} "
            f"(mean |ref| {result['mean_abs_ref']:.4g}), worst error / bound "
            f"{result['worst_error_over_bound']:.3g}"
        )
    print(f"gemm_check_torch: {len(names) - failed} of {len(names)} cases within the bound")
    return 1 if failed else 0


def write_case(directory, name, dtype, m, n, k, b_layout, a, b, c):
    """Writes a case as kjit_ops_gpu_tests does; a, b and c are float32 arrays."""
    import numpy as np

    for suffix, values in (("a", a), ("b", b), ("c", c)):
        bits = values.astype(np.float32).view(np.uint32)
        if dtype == "half":
            raw = values.astype(np.float16).view("<u2")
        else:  # round to nearest even, keeping NaN a NaN
            raw = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
            raw[values != values] = 0xFFFF
        raw.tofile(os.path.join(directory, f"{name}.{suffix}"))
    header = {"case": name, "dtype": dtype, "m": m, "n": n, "k": k, "b_layout": b_layout}
    header.update({suffix: f"{name}.{suffix}" for suffix in "abc"})
    with open(os.path.join(directory, f"{name}.json"), "w") as file:
        json.dump(header, file)


def self_test():
    """Right products pass; one wrong element, poison left, the wrong layout or a missing case
    fail; a skipped dump is no result."""
    try:
        import numpy as np
    except ImportError as error:
        print(f"skipped: numpy is missing ({error})")
        return 77
    rng = np.random.default_rng(17)

    def rounded(values, dtype):  # what kjit would store: the fp32 sum rounded to dtype
        with tempfile.TemporaryDirectory() as scratch:
            write_case(scratch, "r", dtype, 1, values.size, 1, "k_by_n", values, values, values)
            return load_as_float32(os.path.join(scratch, "r.c"), dtype, values.size)

    def dump(directory, dtype, b_layout, spoil=None):
        m, n, k = 37, 24, 40
        a = rounded(rng.uniform(-1, 1, m * k).astype(np.float32), dtype).reshape(m, k)
        b = rounded(rng.uniform(-1, 1, n * k).astype(np.float32), dtype)
        b_used = b.reshape(k, n) if b_layout == "k_by_n" else b.reshape(n, k).T
        c = (a.astype(np.float64) @ b_used.astype(np.float64)).astype(np.float32)
        if spoil:
            spoil(c, a, b)
        write_case(directory, f"{dtype}-{b_layout}", dtype, m, n, k, b_layout, a, b, c)

    def one_element_off(c, a, b):  # 0.05 and a few units of half: far under an indexing error
        c[5, 7] += max(abs(c[5, 7]), 1.0) * 4 * EPSILON["half"] + 0.05

    def poison_left(c, a, b):
        c[36, 23] = np.nan

    def wrong_layout(c, a, b):  # B read as [n, k] where it is [k, n]
        c[:] = a.astype(np.float64) @ b.reshape(24, 40).T.astype(np.float64)

    failures = []

    def expect(label, status, wanted):
        print(f"self-test: {label}: exit {status}, expected {wanted}")
        if status != wanted:
            failures.append(label)

    def check(directory):
        return check_directory(directory, numpy_fp64_product, "numpy fp64 on the CPU")

    for dtype in EPSILON:
        for b_layout in ("k_by_n", "n_by_k"):
            with tempfile.TemporaryDirectory() as directory:
                dump(directory, dtype, b_layout)
                expect(f"{dtype} {b_layout} right", check(directory), 0)
        for label, spoil in (("one element off", one_element_off), ("poison left", poison_left)):
            with tempfile.TemporaryDirectory() as directory:
                dump(directory, dtype, "n_by_k")
                dump(directory, dtype, "k_by_n", spoil)
                expect(f"{dtype} {label}", check(directory), 1)
    with tempfile.TemporaryDirectory() as directory:
        m = n = k = 24  # square, so that the wrong layout reads the right sizes
        a = rounded(rng.uniform(-1, 1, m * k).astype(np.float32), "bfloat16").reshape(m, k)
        b = rounded(rng.uniform(-1, 1, k * n).astype(np.float32), "bfloat16")
        c = (a.astype(np.float64) @ b.reshape(n, k).T.astype(np.float64)).astype(np.float32)
        write_case(directory, "transposed", "bfloat16", m, n, k, "k_by_n", a, b, c)
        expect("wrong layout", check(directory), 1)
    with tempfile.TemporaryDirectory() as directory:
        dump(directory, "half", "k_by_n")
        os.remove(os.path.join(directory, "half-k_by_n.c"))
        expect("missing file", check(directory), 1)
    with tempfile.TemporaryDirectory() as directory:
        expect("no case", check(directory), 1)
        with open(os.path.join(directory, "SKIPPED"), "w") as reason:
            reason.write("not sm_90a")
        expect("skipped dump", check(directory), 0)
    print(f"self-test: {'FAILED: ' + ', '.join(failures) if failures else 'passed'}")
    return 1 if failures else 0


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    if argv[1] == "--self-test":
        return self_test()
    try:
        import numpy  # noqa: F401 (the loader's)
    except ImportError as error:
        return no_result(f"numpy is missing ({error})")
    product, description = torch_cuda_reference()
    if product is None:
        return no_result(description)
    return check_directory(argv[1], product, description)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
