"""Merges kiln-bench and bench_peers.py output (key=value lines) into the results table.

Usage: report.py KILN_OUTPUT PEERS_OUTPUT DEVICE_NAME  -> markdown table on stdout.
"""
import datetime
import sys


def parse(path):
    values = {}
    for line in open(path):
        for token in line.split():
            if "=" in token:
                k, v = token.split("=", 1)
                values[k] = v
    return values


def main():
    kiln, peers, device = parse(sys.argv[1]), parse(sys.argv[2]), sys.argv[3]
    f = lambda d, k: float(d[k]) if k in d else float("nan")
    rows = [
        ("device copy fp32 2^28 (cuMemcpyDtoD, Kiln process)", f"{f(kiln, 'copy_gbps'):.0f} GB/s", "torch copy_ same run", f"{f(peers, 'peer_copy_gbps'):.0f} GB/s", ""),
    ]
    for name, key in [("vector add fp32 2^28", "add"), ("KL divergence fp32 2^28", "kl")]:
        k = f(kiln, f"{key}_gbps")
        t = f(peers, f"triton_{key}_gbps")
        rows.append((f"{name} ({kiln.get(key + '_check', '?')}, relerr {f(kiln, key + '_relerr'):.2e})",
                     f"{k:.0f} GB/s = {100 * k / f(kiln, 'copy_gbps'):.1f}% of copy",
                     f"Triton / torch", f"{t:.0f} / {f(peers, f'torch_{key}_gbps'):.0f} GB/s",
                     f"{k / t:.3f}x Triton"))
    for shape in ["32768x1024", "8192x8192", "4096x32768"]:
        k, t = f(kiln, f"softmax_{shape}_gbps"), f(peers, f"triton_softmax_{shape}_gbps")
        rows.append((f"softmax fp32 {shape} ({kiln.get(f'softmax_{shape}_check', '?')}, relerr {f(kiln, f'softmax_{shape}_relerr'):.1e})",
                     f"{k:.0f} GB/s", "Triton / torch", f"{t:.0f} / {f(peers, f'torch_softmax_{shape}_gbps'):.0f} GB/s",
                     f"{k / t:.3f}x Triton"))
    lh, th = f(kiln, "launch_host_us"), f(peers, "triton_launch_host_us")
    rows.append(("host time per launch, tiny 4-arg kernel (C++ PreparedLaunch vs Triton from Python)",
                 f"{lh:.2f} us", "Triton", f"{th:.2f} us", f"{th / lh:.1f}x less host time"))
    rows.append(("same loop, empty kernel without arguments (the driver's cuLaunchKernel floor)",
                 f"{f(kiln, 'launch_empty_kernel_host_us'):.2f} us", "", "", ""))
    rows.append(("cold in-process compile, vector add (MLIR -> PTX -> cubin)", f"{f(kiln, 'cold_compile_ms'):.1f} ms", "", "", ""))
    rows.append(("second process: find vector add in the disk cache (read + verify)",
                 f"{f(kiln, 'disk_cache_lookup_ms'):.3f} ms", "", "", ""))
    rows.append(("second process: then load it on the device (cuModuleLoadData)",
                 f"{f(kiln, 'module_load_ms'):.2f} ms", "", "", ""))
    rows.append(("second process: CUDA start-up (cuInit + context), paid by any first GPU use",
                 f"{f(kiln, 'cuda_init_ms'):.1f} ms", "", "", ""))
    print(f"# Kiln GPU results — {datetime.date.today()} — {device}\n")
    print("| work | Kiln | peer | peer figure | ratio |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
