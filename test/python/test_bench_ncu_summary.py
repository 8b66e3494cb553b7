"""bench/ncu_summary.py (issue #23's ncu before/after tables) on ncu output written here in
ncu's `--csv --page details` form, the profiled program's lines mixed in, and bench/ncu_cases.py's
case list (it needs no GPU and no torch for --list)."""
import os
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path.insert(0, BENCH)
import ncu_summary  # noqa: E402

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def details(kernel, check, rows):
    """One profiled kernel's details page: (section, metric, unit, value) rows."""
    lines = ["==PROF== Connected to process 1 (/usr/bin/python3)", f"{kernel} rel err {check}",
             HEADER]
    for section, name, unit, value in rows:
        lines.append(f'"0","1","python3","h","{kernel}","1","7","(256, 1, 1)","(132, 1, 1)",'
                     f'"0","9.0","{section}","{name}","{unit}","{value}"')
    return "\n".join(lines) + "\n"


def profile(duration_us, inst, barrier, regs):
    return [("GPU Speed Of Light Throughput", "Duration", "us", f"{duration_us:,}"),
            ("GPU Speed Of Light Throughput", "SM Active Cycles", "cycle", "1,000,000"),
            ("Launch Statistics", "Registers Per Thread", "register/thread", str(regs)),
            ("Command line profiler metrics", "smsp__inst_executed.sum", "inst", f"{inst:,}"),
            ("Command line profiler metrics",
             "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "inst",
             str(barrier)),
            ("Command line profiler metrics", "lts__t_sectors_op_read.sum", "sector", "300"),
            ("Command line profiler metrics", "lts__t_sectors_op_write.sum", "sector", "100")]


def test_before_after_table(tmp_path, capsys):
    before = tmp_path / "before.csv"
    after = tmp_path / "after.csv"
    before.write_text(details("mm_moe", "2.070e-04", profile(267.6, 39_977_568, 0.43, 216)))
    after.write_text(details("mm_moe", "2.070e-04", profile(236.4, 36_517_184, 2.29, 194)))
    ncu_summary.main([str(before), str(after), "--labels", "before,after"])
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("| ")]
    head, rows = lines[0], {line.split(" | ")[0][2:]: line for line in lines[1:]}
    assert "duration us" in head and "instructions" in head and "stall barrier" in head
    assert "267.6" in rows["before"] and "39,977,568" in rows["before"]
    assert "236.4" in rows["after"] and "2.070e-04" in rows["after"]
    assert "400" in rows["after"]  # L2 sectors: read + write
    ratio = rows["after / before"].split(" | ")
    # duration 236.4 / 267.6, instructions 36,517,184 / 39,977,568, registers 194 / 216
    assert "0.883" in ratio or "0.884" in ratio, ratio
    assert "0.913" in ratio and "0.898" in ratio, ratio


def test_case_list_names_each_kernel_and_fix():
    out = subprocess.run([sys.executable, os.path.join(BENCH, "ncu_cases.py"), "--list"],
                         capture_output=True, text=True, check=True).stdout
    cases = [line.split("\t") for line in out.splitlines() if line]
    assert len(cases) >= 20
    index = open(os.path.join(BENCH, "results", "2026-11-28-ncu-evidence-index.md")).read()
    for name, regex, commits, _ in cases:
        assert regex.startswith("regex:^"), (name, regex)
        for commit in commits.split(","):
            assert commit in index, (name, commit)
