#!/usr/bin/env python3
"""Prints the wgmma wrappers that templates/prelude/kjit/hopper.h holds between its "generated"
markers: m64nNk16 with 16-bit inputs and f32 accumulators, A and B from shared memory (both
K-major: S = Q K^T) or A from registers and B MN-major (O += P V). Each of the N / 2 accumulator
registers is one asm operand, the reason it is generated.

    tools/generate/attention_wgmma_wrappers.py > /tmp/w && (edit the block in hopper.h)
"""
for n in (64, 128):
    regs = n // 2
    registers = ",".join(f"%{i}" for i in range(regs))
    operands = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    # A and B descriptors from shared memory, neither transposed.
    a, b, scale = regs, regs + 1, regs + 2
    print(f"#define KJIT_WGMMA_SS_N{n}(TYPE) \\")
    print(f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{scale}, 0;\\n"  \\')
    print(f'               "wgmma.mma_async.sync.aligned.m64n{n}k16.f32." TYPE "." TYPE  \\')
    print(f'               " {{{registers}}}, %{a}, %{b}, p, 1, 1, 0, 0;\\n}}\\n" \\')
    print(f"               : {operands} \\")
    print('               : "l"(a), "l"(b), "r"(accumulate))')
    # A in four registers of packed pairs, B's descriptor MN-major (transposed).
    a0, b, scale = regs, regs + 4, regs + 5
    print(f"#define KJIT_WGMMA_RS_N{n}(TYPE) \\")
    print(f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{scale}, 0;\\n"  \\')
    print(f'               "wgmma.mma_async.sync.aligned.m64n{n}k16.f32." TYPE "." TYPE  \\')
    print(f'               " {{{registers}}}, {{%{a0},%{a0 + 1},%{a0 + 2},%{a0 + 3}}}, %{b}, p, 1, 1, 1;\\n}}\\n" \\')
    print(f"               : {operands} \\")
    print('               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate))')
