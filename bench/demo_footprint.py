"""CPU and memory of `make run`'s demo (the table, the studio and the archive) vs the table alone.

    .venv/bin/python bench/demo_footprint.py [--seconds 30] [--repeat 3] [--strace]

Each run starts the real ``tablectl run --simulate --show --linger`` (what ``make run`` starts)
in a fresh directory (its ``var/``: a new journal and archive), against a Mosquitto the bench
starts (so the broker is outside the measured process, as it is with a local Mosquitto), and
the same with ``--no-studio --no-archive`` (the table alone). The two are run turn about,
``--repeat`` times each, so both see the same load.

Measured from ``/proc`` (no instrumentation in the process):

* **start CPU**: the process's user+system CPU seconds from the spawn to the end of the
  settling time (``--settle``, 5 s: imports, the studio's start, the pit password's hash);
* **steady CPU**: its CPU seconds over the next ``--seconds`` (rounds playing: Teen Patti's
  default 15 s betting window, the simulated dealer, results), and the ratio demo/alone;
* **context switches**: voluntary and involuntary, summed over its threads, in the window
  (each is a thread going to sleep or being woken: the wake-ups);
* **RSS**: ``VmRSS`` at the end of the window and ``VmHWM`` (its peak), in MiB.

``--strace`` adds one more run of each under ``strace -c -f`` for the window (the syscall
counts: ``epoll_wait``, ``futex``, ...; strace slows the process, so its CPU is not used).
Targets (issue 26 item 7): the demo under 80 MiB RSS and under 1.3x the table alone's CPU.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.mosquitto import MosquittoProcess

TABLECTL = Path(sys.executable).with_name("tablectl")
TICKS = os.sysconf("SC_CLK_TCK")
DEMO = ("--show", "--linger", "--studio-port", "0")
ALONE = ("--show", "--no-studio", "--no-archive")


@dataclass
class Sample:
    """One run's figures."""

    start_cpu: float
    cpu: float
    voluntary: int
    involuntary: int
    rss_mib: float
    hwm_mib: float
    threads: int
    syscalls: dict[str, int] = field(default_factory=dict)


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def _switches(pid: int) -> tuple[int, int]:
    voluntary = involuntary = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = _status(int(task.name))
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended
        voluntary += int(status["voluntary_ctxt_switches"])
        involuntary += int(status["nonvoluntary_ctxt_switches"])
    return voluntary, involuntary


def _kib_to_mib(text: str) -> float:
    return int(text.split(maxsplit=1)[0]) / 1024


def _drain(stream: object, lines: list[str], seen: threading.Event) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.append(line)
        if "simulation seed" in line:
            seen.set()


def run_once(
    broker_url: str, options: tuple[str, ...], settle: float, seconds: float, strace: bool
) -> Sample:
    """Start one ``tablectl run --simulate`` in a fresh directory and measure it."""
    work = Path(tempfile.mkdtemp(prefix="demo-footprint-"))
    command = [str(TABLECTL), "run", "--simulate", "--broker", broker_url, *options]
    process = subprocess.Popen(
        command,
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    started = threading.Event()
    reader = threading.Thread(target=_drain, args=(process.stderr, lines, started), daemon=True)
    reader.start()
    try:
        if not started.wait(60):
            raise SystemExit(f"{command}: did not start in 60 s:\n{''.join(lines)[-2000:]}")
        time.sleep(settle)
        start_cpu = _cpu(process.pid)
        before = _switches(process.pid)
        tracer = None
        if strace:
            tracer = subprocess.Popen(
                ["strace", "-c", "-f", "-p", str(process.pid), "-o", str(work / "strace.txt")],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        time.sleep(seconds)
        cpu = _cpu(process.pid) - start_cpu
        after = _switches(process.pid)
        status = _status(process.pid)
        syscalls: dict[str, int] = {}
        if tracer is not None:
            tracer.send_signal(2)
            tracer.wait(30)
            syscalls = _strace_counts(work / "strace.txt")
        if process.poll() is not None:
            raise SystemExit(f"{command}: exited during the run:\n{''.join(lines)[-3000:]}")
        return Sample(
            start_cpu=start_cpu,
            cpu=cpu,
            voluntary=after[0] - before[0],
            involuntary=after[1] - before[1],
            rss_mib=_kib_to_mib(status["VmRSS"]),
            hwm_mib=_kib_to_mib(status["VmHWM"]),
            threads=int(status["Threads"]),
            syscalls=syscalls,
        )
    finally:
        process.kill()  # measured: nothing of its stop matters here (--linger would wait)
        process.wait(15)
        shutil.rmtree(work, ignore_errors=True)


def _strace_counts(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and not line.startswith("100"):
            calls = parts[3]
            if calls.isdigit():
                counts[parts[-1]] = int(calls)
    return counts


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def _report(name: str, samples: list[Sample], seconds: float) -> None:
    print(f"{name} ({len(samples)} runs, medians with min-max):")
    print(f"  start CPU (spawn + settle)   {_median([s.start_cpu for s in samples])} s")
    print(f"  steady CPU over {seconds:.0f} s        {_median([s.cpu for s in samples])} s")
    vol = [float(s.voluntary) for s in samples]
    inv = [float(s.involuntary) for s in samples]
    switches = f"{statistics.median(vol):.0f} / {statistics.median(inv):.0f}"
    print(f"  context switches (vol/invol)  {switches}")
    print(f"  RSS at the end               {_median([s.rss_mib for s in samples])} MiB")
    print(f"  peak RSS (VmHWM)             {_median([s.hwm_mib for s in samples])} MiB")
    print(f"  threads                      {statistics.median([s.threads for s in samples]):.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="the measured window")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after start, first")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strace", action="store_true", help="also count syscalls (strace -c)")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    work = Path(tempfile.mkdtemp(prefix="demo-footprint-broker-"))
    demo: list[Sample] = []
    alone: list[Sample] = []
    with MosquittoProcess(work / "mosquitto") as broker:
        for n in range(args.repeat):
            order = [(DEMO, demo), (ALONE, alone)]
            for options, into in order if n % 2 == 0 else reversed(order):
                into.append(run_once(broker.url, options, args.settle, args.seconds, False))
                print(".", end="", flush=True)
        print()
        if args.repeat > 0:
            _summary(demo, alone, args.seconds)
        if args.strace:
            _strace(broker.url, args.settle, args.seconds)
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


def _summary(demo: list[Sample], alone: list[Sample], seconds: float) -> None:
    _report("demo: table + studio + archive (make run)", demo, seconds)
    _report("table alone (--no-studio --no-archive)", alone, seconds)
    ratios = [d.cpu / a.cpu for d, a in zip(demo, alone, strict=True) if a.cpu > 0]
    ratio = statistics.median(ratios)
    runs = ", ".join(f"{r:.2f}" for r in ratios)
    verdict = "met" if ratio < 1.3 else "MISSED"
    print(f"CPU demo/alone over the window: {ratio:.2f}x (runs {runs})  < 1.3x: {verdict}")
    totals = [
        (d.start_cpu + d.cpu) / (a.start_cpu + a.cpu) for d, a in zip(demo, alone, strict=True)
    ]
    runs = ", ".join(f"{r:.2f}" for r in totals)
    print(
        f"CPU demo/alone from the spawn (start + window): {statistics.median(totals):.2f}x ({runs})"
    )
    rss = statistics.median(s.rss_mib for s in demo)
    hwm = statistics.median(s.hwm_mib for s in demo)
    verdict = "met" if max(rss, hwm) < 80 else "MISSED"
    print(f"demo RSS {rss:.1f} MiB, peak {hwm:.1f} MiB  target < 80 MiB: {verdict}")


def _strace(broker_url: str, settle: float, seconds: float) -> None:
    traced = {
        name: run_once(broker_url, options, settle, seconds, True).syscalls
        for name, options in (("demo", DEMO), ("alone", ALONE))
    }
    names = sorted(
        set(traced["demo"]) | set(traced["alone"]),
        key=lambda n: -(traced["demo"].get(n, 0) + traced["alone"].get(n, 0)),
    )
    print(f"syscalls over {seconds:.0f} s (strace -c -f)   demo    alone")
    for name in names[:15]:
        demo_n, alone_n = traced["demo"].get(name, 0), traced["alone"].get(name, 0)
        print(f"  {name:<28} {demo_n:>7} {alone_n:>7}")


if __name__ == "__main__":
    raise SystemExit(main())
