#!/usr/bin/env python3
"""Prints the wgmma wrappers that templates/prelude/kjit/hopper.h holds between its "generated"
markers: m64nNk16 with 16-bit inputs and f32 accumulators, B's descriptor in shared memory
(K-major, or MN-major with TRANS_B 1) and A either from shared memory as well (KJIT_WGMMA_SS_N*)
or from four registers of packed pairs (KJIT_WGMMA_RS_N*). Each of the N / 2 accumulator
registers is one asm operand, the reason it is generated. The N values are those the templates
use: shared A for moe_wgmma (128, 256) and flash_attention's scores (64, 128), register A for
flash_attention's P V (64, 128).

    tools/generate/wgmma_wrappers.py > /tmp/w && (replace the block in hopper.h)
"""
SHARED_A = (64, 128, 256)
REGISTER_A = (64, 128)


def wrapper(name, n, a_operands, a_inputs):
    regs = n // 2
    registers = ",".join(f"%{i}" for i in range(regs))
    outputs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
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


for n in SHARED_A:
    wrapper(f"KJIT_WGMMA_SS_N{n}", n, 1, '"l"(a)')
for n in REGISTER_A:
    wrapper(f"KJIT_WGMMA_RS_N{n}", n, 4, '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])')
