#!/usr/bin/env python3
"""Prints the wgmma wrappers that the Hopper templates (gemm_wgmma.hip, kjit/wgmma.h, gemm_fp8.hip)
hold between their "generated" markers: one call per N whose N / 2 f32 accumulator registers are
each one asm operand (the reason it is generated).

    tools/generate/wgmma_wrappers.py > /tmp/w       gemm_wgmma.hip: m64nNk16, 16-bit inputs
    tools/generate/wgmma_wrappers.py --fp8 > /tmp/w gemm_fp8.hip: m64nNk32, e4m3 inputs (K-major
                                                    both: fp8 has no transposed operands)
"""
import sys

fp8 = "--fp8" in sys.argv[1:]
for n in (64, 128, 256) if fp8 else (128, 256):
    regs = n // 2
    registers = ",".join(f"%{i}" for i in range(regs))
    operands = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    a, b, scale, trans = regs, regs + 1, regs + 2, regs + 3
    if fp8:
        print(f"#define KJIT_WGMMA_E4M3_N{n}                                                                     \\")
        print(f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{scale}, 0;\\nwgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3" \\')
        print(f'               " {{{registers}}}, %{a}, %{b}, p, 1, 1;\\n}}\\n" \\')
        print(f"               : {operands} \\")
        print('               : "l"(a), "l"(b), "r"(accumulate))')
        continue
    print(f"#define KJIT_WGMMA_N{n}(TYPE)                                                                   \\")
    print(f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{scale}, 0;\\nwgmma.mma_async.sync.aligned.m64n{n}k16.f32." TYPE \\')
    print(f'               "." TYPE " {{{registers}}}, %{a}, %{b}, p, 1, 1, 0, %{trans};\\n}}\\n" \\')
    print(f"               : {operands} \\")
    print('               : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_B))')
