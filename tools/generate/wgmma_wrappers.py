#!/usr/bin/env python3
"""Prints the wgmma wrappers that the Hopper templates hold between their "generated" markers.
Each of the N / 2 f32 accumulator registers is one asm operand, the reason it is generated.

    tools/generate/wgmma_wrappers.py          templates/prelude/kjit/hopper.h: m64nNk16 with
                                              16-bit inputs, B's descriptor in shared memory
                                              (K-major, or MN-major with TRANS_B 1) and A either
                                              from shared memory as well (KJIT_WGMMA_SS_N*) or
                                              from four registers of packed pairs
                                              (KJIT_WGMMA_RS_N*); the N values gemm_wgmma (16 to
                                              256), moe_wgmma (128, 256) and flash_attention (64,
                                              128) use
    tools/generate/wgmma_wrappers.py --fp8    templates/prelude/kjit/hopper_fp8.h: m64nNk32, e4m3
                                              inputs (K-major both: fp8 has no transposed operands),
                                              A from shared memory (KJIT_WGMMA_E4M3_N*) or from
                                              four registers (KJIT_WGMMA_E4M3_RS_N*)
"""
import sys

SHARED_A = (16, 32, 64, 128, 256)
REGISTER_A = (64, 128)
# gemm_fp8's tile widths: besides the powers of two, the widths that fill an H100's 132
# multiprocessors in whole waves on DeepSeek-V3's shapes (BENCHMARKS.md, fp8b and fp8c helpers).
FP8_N = (64, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256)
# gemm_fp8's halves of a 256-column tile with A from registers (block scales).
FP8_REGISTER_A = (128,)


def accumulators(n):
    regs = n // 2
    return regs, ",".join(f"%{i}" for i in range(regs)), ", ".join(
        f'"+f"(d[{i}])' for i in range(regs))


def hopper_wrapper(name, n, a_operands, a_inputs):
    regs, registers, outputs = accumulators(n)
    a = ",".join(f"%{regs + i}" for i in range(a_operands))
    if a_operands > 1:
        a = "{" + a + "}"
    b, scale, trans = regs + a_operands, regs + a_operands + 1, regs + a_operands + 2
    # Register A has no transpose flag: its scale-a and scale-b are followed by trans-b only.
    flags = "1, 1, 0, " if a_operands == 1 else "1, 1, "
    print(f"#define {name}(TYPE) \\")
    print(f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{scale}, 0;\\n"  \\')
    print(f'               "wgmma.mma_async.sync.aligned.m64n{n}k16.f32." TYPE "." TYPE  \\')
    print(f'               " {{{registers}}}, {a}, %{b}, p, {flags}%{trans};\\n}}\\n" \\')
    print(f"               : {outputs} \\")
    print(f'               : {a_inputs}, "l"(b), "r"(accumulate), "n"(TRANS_B))')


def fp8_wrapper(n, register_a=False):
    # A from shared memory (a descriptor), or from four registers of four e4m3 each (a warp's 16
    # rows of m64nNk32, ldmatrix's layout).
    regs, registers, outputs = accumulators(n)
    a_operands = 4 if register_a else 1
    a = ",".join(f"%{regs + i}" for i in range(a_operands))
    a = "{" + a + "}" if register_a else a
    a_inputs = '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])' if register_a else '"l"(a)'
    b, scale = regs + a_operands, regs + a_operands + 1
    name = f"KJIT_WGMMA_E4M3_{'RS_' if register_a else ''}N{n}"
    print(f"#define {name}" + " " * 69 + "\\")
    print(f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{scale}, 0;\\nwgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3" \\')
    print(f'               " {{{registers}}}, {a}, %{b}, p, 1, 1;\\n}}\\n" \\')
    print(f"               : {outputs} \\")
    print(f'               : {a_inputs}, "l"(b), "r"(accumulate))')



if "--fp8" in sys.argv[1:]:
    for n in FP8_N:
        fp8_wrapper(n)
    for n in FP8_REGISTER_A:
        fp8_wrapper(n, register_a=True)
else:
    for n in SHARED_A:
        hopper_wrapper(f"KJIT_WGMMA_SS_N{n}", n, 1, '"l"(a)')
    for n in REGISTER_A:
        hopper_wrapper(f"KJIT_WGMMA_RS_N{n}", n, 4, '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])')
