#!/usr/bin/env python3
"""Prints the wgmma wrappers that templates/kernels/gemm_wgmma.hip and templates/prelude/kjit/wgmma.h
hold between their "generated" markers: one m64nNk16 call per N, for 16-bit inputs and f32
accumulators, whose N / 2
accumulator registers are each one asm operand (the reason it is generated).

    tools/generate/wgmma_wrappers.py > /tmp/w && (edit the block in gemm_wgmma.hip)
"""
for n in (128, 256):
    regs = n // 2
    registers = ",".join(f"%{i}" for i in range(regs))
    operands = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    a, b, scale, trans = regs, regs + 1, regs + 2, regs + 3
    print(f"#define KJIT_WGMMA_N{n}(TYPE)                                                                   \\")
    print(f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{scale}, 0;\\nwgmma.mma_async.sync.aligned.m64n{n}k16.f32." TYPE \\')
    print(f'               "." TYPE " {{{registers}}}, %{a}, %{b}, p, 1, 1, 0, %{trans};\\n}}\\n" \\')
    print(f"               : {operands} \\")
    print('               : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_B))')
