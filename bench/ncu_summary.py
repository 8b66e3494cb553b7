#!/usr/bin/env python3
"""One line per kernel Nsight Compute profiled: the figures issue #23's before/after pairs
quote (bench/results/2026-11-28-ncu-evidence-index.md), read from ncu's output in one or more
files, as a markdown table. Each file is what ncu printed: its details page as CSV (`--csv
--page details`), its raw page as CSV (`--csv --page raw`) or the default text; the profiled
program's own output and ncu's ==PROF== lines may be mixed in (a line "CASE rel err X" of
bench/ncu_cases.py is shown beside the kernel).

The command it is written for (bench/ncu_cases.py's; regex:K is the case's kernel filter as
`python3 bench/ncu_cases.py --list` prints it):

    ncu --clock-control none --kernel-name regex:K --launch-skip 1 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats --section LaunchStats \\
        --section InstructionStats --section MemoryWorkloadAnalysis --csv --page details \\
        python3 bench/ncu_cases.py CASE > before.csv 2>&1
    python3 bench/ncu_summary.py before.csv after.csv [--labels before,after] [--stalls 6]

Those sections give duration, elapsed and SM active cycles, DRAM throughput (SpeedOfLight),
registers a thread (LaunchStats), executed instructions (InstructionStats), warp cycles per
issued instruction (WarpStateStats). The details page prints a section's header metrics only:
issue slots busy, the stall reasons (the WarpStateStats chart) and L2 sectors need their
metrics named too, which probe scripts add to the command (one --metrics
list; ncu prints them under "Command line profiler metrics"):

    M='smsp__issue_active.avg.pct_of_peak_sustained_active'
    M+=',regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio'
    M+=',smsp__inst_executed.sum,sm__cycles_active.avg,lts__t_sectors_op_read.sum'
    M+=',lts__t_sectors_op_write.sum,dram__bytes_read.sum,dram__bytes_write.sum'
    ncu ... --metrics "$M" --csv --page details python3 bench/ncu_cases.py CASE

A stall is read, in this order, from smsp__average_warps_issue_stalled_<reason>_per_issue_
active.ratio (cycles a warp spent in the stall per issued instruction, the figure the results
files quote), from the WarpStateStats section's own rows named "Stall <Reason>" (with
`--print-details all`), or from smsp__average_warp_latency_issue_stalled_<reason>[.ratio] (as
ncu gives it). Columns a file lacks print as "-". With two kernels in all (a before and an
after) a last row gives the second's figures over the first's.

Columns: duration (us), elapsed cycles (sm__cycles_elapsed.max), SM active cycles, executed
instructions, issue slots busy (%), registers a thread, warp cycles per issued instruction,
DRAM throughput (% of peak), L2 sectors (read + write), DRAM bytes (MB, read + write), and the
top --stalls reasons (the union of each kernel's largest, so that rows line up).
"""
import argparse
import csv
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

STALL_PER_ISSUE = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
STALL_LATENCY = re.compile(r"^smsp__average_warp_latency_issue_stalled_(\w+?)(?:\.ratio)?$")
STALL_LABEL = re.compile(r"^Stall (.+)$")
CHECK = re.compile(r"^(\S+) rel err (\S+)\s*$")

TIME_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "\u00b5s": 1.0, "ms": 1e3,
           "msecond": 1e3, "s": 1e6, "second": 1e6}
PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}

# (column, header, [(section or None, metric name or label), ...] in order of preference)
COLUMNS = [
    ("dur_us", "duration us", [("Duration",), ("gpu__time_duration.sum",)]),
    ("cycles", "elapsed cycles", [("Elapsed Cycles",), ("sm__cycles_elapsed.max",)]),
    ("sm_cycles", "SM active cycles", [("SM Active Cycles",), ("sm__cycles_active.avg",)]),
    ("inst", "instructions", [("Executed Instructions",), ("smsp__inst_executed.sum",),
                              ("sm__inst_executed.sum",)]),
    ("issue", "issue active %", [("Issue Slots Busy",),
                                 ("smsp__issue_active.avg.pct_of_peak_sustained_active",)]),
    ("regs", "registers", [("Registers Per Thread",), ("launch__registers_per_thread",)]),
    ("cpi", "warp cycles / issue", [("Warp Cycles Per Issued Instruction",),
                                    ("smsp__average_warp_latency_per_inst_issued.ratio",)]),
    ("dram", "DRAM %", [("DRAM Throughput",),
                        ("dram__throughput.avg.pct_of_peak_sustained_elapsed",)]),
]


def number(text):
    """A metric's value as a float (thousands separators dropped), None if it is not one."""
    t = text.strip().replace(",", "")
    if t.startswith("(!)"):
        t = t[3:].strip()
    try:
        return float(t)
    except ValueError:
        return None


def scaled(value, unit):
    """value in its unit's base (byte, cycle, inst, ...): Kbyte -> byte, Mcycle -> cycle."""
    if value is None:
        return None
    u = (unit or "").strip()
    if len(u) > 1 and u[0] in PREFIX and u[1].isalpha():  # Kbyte, MB, Gcycle, Minst
        return value * PREFIX[u[0]]
    return value


class Kernel:
    """One profiled launch: `metrics` maps a metric's name (the raw name, or the section's
    label) to (unit, text); `sections` maps (section, name) to the same."""

    def __init__(self, source, ident, name, grid="", block=""):
        self.source, self.ident, self.name = source, ident, name
        self.grid, self.block = grid, block
        self.metrics, self.sections = {}, {}
        self.check = None

    def add(self, section, name, unit, text):
        name, section = name.strip(), (section or "").strip()
        if not name:
            return
        self.metrics.setdefault(name, (unit.strip(), text.strip()))
        self.sections[(section, name)] = (unit.strip(), text.strip())

    def value(self, name):
        """The metric's value in base units (durations in microseconds), or None."""
        if name not in self.metrics:
            return None
        unit, text = self.metrics[name]
        v = number(text)
        if v is None:
            return None
        if unit in TIME_US:
            return v * TIME_US[unit]
        if name == "gpu__time_duration.sum" and not unit:
            return v * 1e-3  # ns when ncu gives no unit
        return scaled(v, unit)

    def first(self, names):
        for (name,) in names:
            v = self.value(name)
            if v is not None:
                return v
        return None

    def sum_of(self, *names):
        vals = [self.value(n) for n in names]
        return sum(vals) if vals and all(v is not None for v in vals) else None

    def stalls(self):
        """{reason: cycles per issued instruction} (see the module's docstring for the
        sources, first found wins)."""
        found = {m.group(1): self.value(n) for n in self.metrics
                 for m in [STALL_PER_ISSUE.match(n)] if m and self.value(n) is not None
                 and m.group(1) != "selected"}  # (selected: issuing, 1 by definition)
        if found:
            return found
        for (section, name), (unit, text) in self.sections.items():
            m = STALL_LABEL.match(name)
            if m and "warp state" in section.lower() and number(text) is not None:
                found[re.sub(r"\W+", "_", m.group(1).strip().lower())] = number(text)
        if found:
            return found
        return {m.group(1): self.value(n) for n in self.metrics
                for m in [STALL_LATENCY.match(n)] if m and self.value(n) is not None}

    def row(self):
        r = {key: self.first(names) for key, _, names in COLUMNS}
        l2 = self.sum_of("lts__t_sectors_op_read.sum", "lts__t_sectors_op_write.sum")
        r["l2"] = l2 if l2 is not None else self.value("lts__t_sectors.sum")
        dram = self.sum_of("dram__bytes_read.sum", "dram__bytes_write.sum")
        r["dram_mb"] = dram / 1e6 if dram is not None else None
        return r


# ---------------------------------------------------------------- readers

def read_csv_lines(source, lines, kernels):
    """ncu's CSV: the details page (a row per metric) or the raw page (a row per kernel, its
    columns raw metric names, a units row after the header)."""
    header, names, units, by_id = None, [], None, {}
    for row in csv.reader(lines):
        if "ID" in row and "Kernel Name" in row:  # a header (one per ncu run in the file)
            header = {c: i for i, c in enumerate(row)}
            names, units, by_id = row, None, {}
            continue
        if header is None:
            continue

        def col(name):
            i = header.get(name)
            return row[i] if i is not None and i < len(row) else ""
        if "Metric Name" in header:
            key = (col("ID"), col("Kernel Name"))
            k = by_id.get(key)
            if k is None:
                k = by_id[key] = Kernel(source, key[0], key[1], col("Grid Size"),
                                        col("Block Size"))
                kernels.append(k)
            k.add(col("Section Name"), col("Metric Name"), col("Metric Unit"),
                  col("Metric Value"))
        elif not col("ID"):  # the raw page's units
            units = row
        else:
            k = Kernel(source, col("ID"), col("Kernel Name"), col("Grid Size"),
                       col("Block Size"))
            kernels.append(k)
            for i, name in enumerate(names):
                if "__" in name and i < len(row):
                    k.add("raw", name, units[i] if units and i < len(units) else "", row[i])


KERNEL_LINE = re.compile(r"^  (\S.*?)(?: \(([\d, ]+)\)x\(([\d, ]+)\))?, (?:.*?, )?Context \d+, "
                         r"Stream \d+")


def read_text_lines(source, lines, kernels):
    """ncu's default text: a line per kernel, then per section a table between dashed lines,
    its columns those of the dashes."""
    k, section, dashes, spans = None, "", 0, None
    for line in lines:
        line = line.rstrip("\n")
        m = KERNEL_LINE.match(line)
        if m:
            k = Kernel(source, str(len(kernels)), m.group(1).strip(), m.group(2) or "",
                       m.group(3) or "")
            kernels.append(k)
            section, dashes = "", 0
            continue
        if k is None:
            continue
        s = re.match(r"^\s+Section: (.+)$", line)
        if s:
            section, dashes, spans = s.group(1).strip(), 0, None
            continue
        if re.match(r"^\s+-{3,}( -{3,})*\s*$", line):
            dashes += 1
            spans = [(d.start(), d.end()) for d in re.finditer(r"-+", line)]
            continue
        if dashes == 2 and spans and len(spans) >= 2 and line.strip():
            cells = [line[a:(spans[i + 1][0] if i + 1 < len(spans) else len(line))].strip()
                     for i, (a, _) in enumerate(spans)]
            name, value = cells[0], cells[-1]
            unit = cells[1] if len(cells) >= 3 else ""
            k.add(section, name, unit, value)


def read(path):
    """The kernels of one file and the "CASE rel err X" lines in it."""
    source = os.path.splitext(os.path.basename(path))[0]
    with open(path, errors="replace") as f:
        lines = f.readlines()
    checks = [m.group(1) + " " + m.group(2) for m in map(CHECK.match, lines) if m]
    problems = [ln.strip() for ln in lines if ln.startswith(("==ERROR==", "==WARNING=="))
                or "Traceback" in ln or "could not run" in ln]
    kernels = []
    quoted = [ln for ln in lines if ln.startswith('"')]
    if quoted:
        read_csv_lines(source, quoted, kernels)
    else:
        read_text_lines(source, lines, kernels)
    for k in kernels:
        k.check = checks[-1] if checks else None
    return kernels, checks, problems


# ---------------------------------------------------------------- output

def fmt(v, key):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if key in ("cycles", "sm_cycles", "inst", "l2", "regs"):
        return f"{v:,.0f}"
    if key in ("dur_us", "dram_mb"):
        return f"{v:,.1f}"
    return f"{v:.2f}" if abs(v) < 100 else f"{v:,.1f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="ncu output (CSV or text), one or more")
    ap.add_argument("--stalls", type=int, default=6,
                    help="the largest stall reasons of each kernel to show (default 6)")
    ap.add_argument("--title", default=None, help="a line printed above the table")
    ap.add_argument("--labels", default=None,
                    help="comma-separated names for the files' rows, in order (default: the "
                         "files' names)")
    ap.add_argument("--no-ratio", action="store_true", help="no second/first row")
    args = ap.parse_args(argv)
    labels = args.labels.split(",") if args.labels else []
    kernels, notes = [], []
    for i, path in enumerate(args.files):
        try:
            ks, checks, problems = read(path)
        except OSError as e:
            notes.append(f"{path}: {e}")
            continue
        if i < len(labels):
            for k in ks:
                k.source = labels[i]
        kernels += ks
        if not ks:
            why = "; ".join(problems[-3:]) or "no profiled kernel in the file"
            notes.append(f"{os.path.basename(path)}: no profiled kernel"
                         f"{' (' + checks[-1] + ')' if checks else ''}: {why}")
    rows = [k.row() for k in kernels]
    stalls = [k.stalls() for k in kernels]
    chosen = {}
    for st in stalls:
        for reason, v in sorted(st.items(), key=lambda kv: -kv[1])[:args.stalls]:
            chosen[reason] = max(chosen.get(reason, 0.0), v)
    reasons = sorted(chosen, key=lambda r: -chosen[r])
    keys = [key for key, _, _ in COLUMNS] + ["l2", "dram_mb"]
    heads = [h for _, h, _ in COLUMNS] + ["L2 sectors", "DRAM MB"]
    if args.title:
        print(f"\n#### {args.title}\n")
    table = []
    for k, r, st in zip(kernels, rows, stalls):
        name = k.name if len(k.name) <= 40 else k.name[:37] + "..."
        check = k.check.split(" ", 1)[1] if k.check else "-"
        table.append([k.source, name, check] + [fmt(r[c], c) for c in keys] +
                     [fmt(st.get(s), "stall") for s in reasons])
    if len(kernels) == 2 and not args.no_ratio:
        def ratio(a, b):
            return f"{b / a:.3f}" if a and b is not None else "-"
        a, b = rows
        table.append([f"{kernels[1].source} / {kernels[0].source}", "", ""] +
                     [ratio(a[c], b[c]) for c in keys] +
                     [ratio(stalls[0].get(s), stalls[1].get(s)) for s in reasons])
    common.markdown_table(["file", "kernel", "check"] + heads + [f"stall {r}" for r in reasons],
                          table, align="lll")
    for n in notes:
        print(f"\n{n}")
    return 0 if kernels else 1


if __name__ == "__main__":
    sys.exit(main())
