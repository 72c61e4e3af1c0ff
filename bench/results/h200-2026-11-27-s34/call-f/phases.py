"""Mean power (instant samples, a phase's first 1.5 s left out) and SM clock of nvidia-smi's samples between each start/end mark of power.py."""
import sys, re, datetime
marks = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\d\d:\d\d:\d\d\.\d+) (.*?) (start|end)", line)
    if m:
        marks.setdefault(m.group(2), {})[m.group(3)] = m.group(1)
rows = []
for line in open(sys.argv[2]):
    p = [x.strip() for x in line.split(",")]
    if len(p) < 6 or "MHz" not in p[1]:
        continue
    rows.append((p[0].split(" ")[1], float(p[1].split()[0]), float(p[3].split()[0]), p[5]))
for name, se in marks.items():
    if "start" not in se or "end" not in se:
        continue
    # the first 1.5 s of a phase left out: the card ramping from idle
    h, m, sec = se["start"].split(":")
    later = float(sec) + 1.5
    start = f"{h}:{m}:{later:06.3f}" if later < 60 else se["start"]
    inside = [r for r in rows if start <= r[0] <= se["end"]]
    if inside:
        print(f"{name}: {len(inside)} samples, power {sum(r[2] for r in inside)/len(inside):.0f} W, "
              f"SM clock {sum(r[1] for r in inside)/len(inside):.0f} MHz, reasons {sorted(set(r[3] for r in inside))}")
