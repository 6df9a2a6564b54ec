"""Server overhead benchmark: `deepinfer serve` against the engine called directly, one run.

    python3 bench/server/server_bench.py --build build [--model tests/fixtures/v41_tiny_f32] \
        [--levels 1:8,16:32,64:128,200:200] [--prompt-len 16] [--max-tokens 16] [--repeats 3]

For each level C:R, C clients each keep one streaming /v1/completions request in flight
(closed loop, one keep-alive connection per client) until R requests have finished. Every
request has fixed token-id prompts, greedy sampling and ignore_eos, so every side generates
exactly R * max_tokens tokens. The same levels then run in `server_engine_bench`
(bench/server/engine_stream.cpp) on the synchronous Engine (the model's cost alone) and on
AsyncEngine (the thread the server sits on), with the same max_num_seqs and token budget.

The server's own overhead is the difference: (server wall - engine wall) / tokens, and per
request; and, less sensitive to the other processes on a shared machine, the server process's
CPU seconds minus the engine's, per token, plus the CPU of the server's threads other than the
engine loop (the HTTP side measured directly). The client is a raw asyncio HTTP/1.1 client
(no openai/httpx/aiohttp: their parsing cost would be counted against the server on a 2-core
machine); its own CPU seconds are reported so its share of the machine is visible, and one
level (--openai-level) runs once more through the official openai client for comparison.

Prints a Markdown report (machine, load average, commands, tables) on stdout. A benchmark:
numbers are recorded in bench/results/, never asserted on.
"""
import argparse
import asyncio
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

TOKEN_IDS = re.compile(rb'"token_ids":\s*\[([^\]]*)\]')
COMPLETION_TOKENS = re.compile(rb'"completion_tokens":\s*(\d+)')
CLK_TCK = os.sysconf("SC_CLK_TCK")


def prompt_ids(r, n):
    # The same ids as make_request() in engine_stream.cpp: any vocabulary >= 259 holds them.
    return [3 + (r * 131 + k * 17) % 256 for k in range(n)]


def pct(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


# ---------------------------------------------------------------------------- server process

def proc_cpu(path):
    """utime + stime in seconds from a /proc/.../stat file (fields after the comm's ')')."""
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def process_cpu(pid):
    """The process's CPU seconds at ns resolution: Linux's per-process CPU clock of another
    process is readable as clock id ((~pid) << 3) | 2 (CPUCLOCK_SCHED), what
    clock_getcpuclockid() returns; /proc's ticks are 10 ms."""
    return time.clock_gettime(((~pid) << 3) | 2)


def thread_cpu(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out[tid] = proc_cpu(f"/proc/{pid}/task/{tid}/stat")
        except OSError:  # a thread that just ended
            pass
    return out


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024  # kB -> MiB
    return float("nan")


class Server:
    def __init__(self, args):
        self.log = tempfile.NamedTemporaryFile(prefix="server_bench_", suffix=".log", delete=False)
        self.cmd = [os.path.join(args.build, "deepinfer"), "serve", "--model", args.model, "--host", "127.0.0.1",
                    "--port", "0", "--served-model-name", "bench", "--prefix-cache", "off",
                    "--max-num-seqs", str(args.max_num_seqs), "--max-num-batched-tokens", str(args.max_num_batched_tokens),
                    "--http-threads", str(args.http_threads)]
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=self.log)
        self.port = None
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"server exited with {self.proc.returncode}:\n{open(self.log.name).read()}")
            if self.port is None:
                m = re.search(r"listening on http://[^:]+:(\d+)", open(self.log.name).read())
                self.port = int(m.group(1)) if m else None
            if self.port is not None:
                try:
                    if urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2).status == 200:
                        return
                except OSError:
                    pass
            time.sleep(0.1)
        self.stop()
        raise SystemExit("server did not become ready in 120 s")

    def stop(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        os.unlink(self.log.name)
        return rc


# ---------------------------------------------------------------------------- raw HTTP client

class Client:
    """One keep-alive connection; one streaming completion at a time."""

    def __init__(self, port):
        self.port = port
        self.reader = self.writer = None

    async def request(self, body, rec):
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        payload = json.dumps(body).encode()
        start = time.perf_counter()
        self.writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status != 200 or b"chunked" not in head.lower():
            raise RuntimeError(f"unexpected response: {head[:200]!r}")
        last, tokens, usage, buf = None, 0, None, b""
        while True:
            size = int((await self.reader.readline()).split(b";")[0], 16)
            if size == 0:
                await self.reader.readline()
                break
            buf += (await self.reader.readexactly(size + 2))[:-2]
            now = time.perf_counter()
            *events, buf = buf.split(b"\n\n")
            for ev in events:
                m = TOKEN_IDS.search(ev)
                n = len(m.group(1).split(b",")) if m and m.group(1).strip() else 0
                if n:
                    if last is None:
                        rec["ttft"].append(now - start)
                    else:
                        rec["itl"].append(now - last)
                    last = now
                    tokens += n
                elif b'"usage":{' in ev:
                    usage = int(COMPLETION_TOKENS.search(ev).group(1))
        if usage != tokens:
            raise RuntimeError(f"streamed {tokens} tokens but usage says {usage}")
        rec["tokens"] += tokens

    def close(self):
        if self.writer is not None:
            self.writer.close()


async def drive(port, args, concurrency, requests):
    rec = {"ttft": [], "itl": [], "tokens": 0}
    counter = iter(range(requests))
    clients = [Client(port) for _ in range(concurrency)]

    async def worker(c):
        for r in counter:
            await c.request({"model": "bench", "prompt": prompt_ids(r, args.prompt_len), "max_tokens": args.max_tokens,
                             "temperature": 0, "ignore_eos": True, "stream": True, "return_token_ids": True,
                             "stream_options": {"include_usage": True}}, rec)

    start = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    rec["wall_s"] = time.perf_counter() - start
    for c in clients:
        c.close()
    return rec


def server_level(server, args, concurrency, requests):
    pid = server.proc.pid
    rss0 = proc_status(pid, "VmRSS")
    threads0, cpu0, client0, load0 = thread_cpu(pid), process_cpu(pid), time.process_time(), os.getloadavg()[0]
    rec = asyncio.run(drive(server.port, args, concurrency, requests))
    threads1, cpu1 = thread_cpu(pid), process_cpu(pid)
    deltas = {t: threads1[t] - threads0.get(t, 0.0) for t in threads1}
    # serve() starts its io threads right after binding, before the model (and with it the
    # engine loop and the ops' worker pool) exists, so the HTTP side is the main thread plus
    # the first --http-threads thread ids; everything later belongs to the engine.
    http_tids = sorted(deltas, key=int)[:1 + args.http_threads]
    # Per-thread CPU only as 10 ms ticks: schedstat's runtime reads 0 on this VM's kernel.
    http_cpu = sum(deltas[t] for t in http_tids)
    rec.update(mode="server", concurrency=concurrency, requests=requests, cpu_s=cpu1 - cpu0,
               http_threads_cpu_s=http_cpu, engine_threads_cpu_s=cpu1 - cpu0 - http_cpu,
               client_cpu_s=time.process_time() - client0, rss_before_mib=rss0, rss_after_mib=proc_status(pid, "VmRSS"),
               load=(load0, os.getloadavg()[0]),
               ttft_p50_ms=1e3 * pct(rec["ttft"], 50), ttft_p99_ms=1e3 * pct(rec["ttft"], 99),
               itl_p50_ms=1e3 * pct(rec["itl"], 50), itl_p99_ms=1e3 * pct(rec["itl"], 99))
    expected = requests * args.max_tokens
    if rec["tokens"] != expected:
        raise SystemExit(f"server level {concurrency}:{requests} streamed {rec['tokens']} tokens, expected {expected}")
    return rec


def engine_level(args, mode, concurrency, requests):
    cmd = [os.path.join(args.build, "server_engine_bench"), args.model, "--levels", f"{concurrency}:{requests}",
           "--mode", mode,
           "--prompt-len", str(args.prompt_len), "--max-tokens", str(args.max_tokens),
           "--max-num-seqs", str(args.max_num_seqs), "--max-num-batched-tokens", str(args.max_num_batched_tokens)]
    load0 = os.getloadavg()[0]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    recs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for r in recs:
        r["load"] = (load0, os.getloadavg()[0])
        if r["tokens"] != r["requests"] * args.max_tokens:
            raise SystemExit(f"engine ({mode}) produced {r['tokens']} tokens for {r['requests']} requests")
    return recs[0], " ".join(cmd)


async def drive_openai(port, args, concurrency, requests):
    """The same level through the official openai client, to show what the client costs."""
    import openai
    client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=600)
    rec = {"ttft": [], "itl": [], "tokens": 0}
    counter = iter(range(requests))

    async def worker():
        for r in counter:
            start, last, usage = time.perf_counter(), None, None
            stream = await client.completions.create(
                model="bench", prompt=prompt_ids(r, args.prompt_len), max_tokens=args.max_tokens, temperature=0,
                stream=True, stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
            async for chunk in stream:
                now = time.perf_counter()
                if chunk.usage:
                    usage = chunk.usage.completion_tokens
                if chunk.choices and chunk.choices[0].text:
                    (rec["itl"] if last is not None else rec["ttft"]).append(now - (last or start))
                    last = now
            if usage != args.max_tokens:
                raise RuntimeError(f"openai client: usage says {usage} tokens, expected {args.max_tokens}")
            rec["tokens"] += usage

    client0, start = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    rec.update(wall_s=time.perf_counter() - start, client_cpu_s=time.process_time() - client0, requests=requests)
    await client.close()
    return rec


# ---------------------------------------------------------------------------- report

def report(args, best, rss, loads, engine_cmd, openai_rec, started, elapsed):
    # The commit the binaries were built from: the source dir in the build's CMake cache.
    src = "."
    with open(os.path.join(args.build, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                src = line.split("=", 1)[1].strip()
    git = lambda *a: subprocess.run(["git", "-C", src, *a], capture_output=True, text=True).stdout.strip()
    commit, dirty = git("rev-parse", "--short", "HEAD") or "unknown", git("status", "--porcelain", "--untracked-files=no")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"- date: {started:%Y-%m-%d %H:%M} UTC")
    print(f"- commit: {commit}{' (+ uncommitted changes)' if dirty else ''} (built from {src})")
    print(f"- machine: {os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}; "
          f"load average (1 min) during the run: min {min(loads):.2f}, max {max(loads):.2f}")
    print(f"- model: {args.model}; prompt {args.prompt_len} token ids, max_tokens {args.max_tokens} (ignore_eos, greedy); "
          f"max_num_seqs {args.max_num_seqs}, max_num_batched_tokens {args.max_num_batched_tokens}, prefix cache off, "
          f"{args.http_threads} http threads; {args.repeats} repeats, each number the minimum over them (latency "
          f"percentiles: the repeat with the shortest wall); whole run {elapsed:.0f} s")
    print(f"- command: `python3 bench/server/server_bench.py {' '.join(sys.argv[1:])}`")
    print(f"- engine side: `{engine_cmd}` (and `--mode async`)")
    print()
    print("Throughput and latency (client-side for the server; where outputs are consumed for the engine):\n")
    print("| C:R | side | wall s (slowest repeat) | req/s | tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for level in args.level_list:
        for side in ("server", "sync", "async"):
            r = best[(side, level)]
            print(f"| {level[0]}:{level[1]} | {'server (HTTP)' if side == 'server' else 'engine ' + side} | "
                  f"{r['wall_s']:.2f} ({r['wall_max_s']:.2f}) | {r['requests'] / r['wall_s']:.2f} | {r['tokens'] / r['wall_s']:.1f} | "
                  f"{r['ttft_p50_ms']:.1f} / {r['ttft_p99_ms']:.1f} | {r['itl_p50_ms']:.2f} / {r['itl_p99_ms']:.2f} | "
                  f"{r['cpu_s']:.2f} |")
    print()
    print("Server overhead (vs the synchronous Engine; in brackets vs AsyncEngine). Wall: (server wall - engine wall) "
          "/ tokens or / requests. CPU: (server process CPU - engine process CPU) / tokens. HTTP threads: CPU of the "
          "server's main and io threads (everything but the engine loop and the ops' pool), / tokens (counted "
          f"in {1e3 / CLK_TCK:.0f} ms ticks: one tick is {1e6 / CLK_TCK / min(r * args.max_tokens for _, r in args.level_list):.0f} "
          "µs/token at the smallest level). Client: the load generator's own CPU / tokens.\n")
    print("| C:R | tokens | wall µs/token | wall ms/request | CPU µs/token | HTTP threads µs/token | client µs/token |")
    print("|---|---|---|---|---|---|---|")
    for level in args.level_list:
        s, e, a = best[("server", level)], best[("sync", level)], best[("async", level)]
        tok, req = s["tokens"], s["requests"]
        print(f"| {level[0]}:{level[1]} | {tok} | {1e6 * (s['wall_s'] - e['wall_s']) / tok:.0f} "
              f"({1e6 * (s['wall_s'] - a['wall_s']) / tok:.0f}) | {1e3 * (s['wall_s'] - e['wall_s']) / req:.2f} "
              f"({1e3 * (s['wall_s'] - a['wall_s']) / req:.2f}) | {1e6 * (s['cpu_s'] - e['cpu_s']) / tok:.0f} "
              f"({1e6 * (s['cpu_s'] - a['cpu_s']) / tok:.0f}) | {1e6 * s['http_threads_cpu_s'] / tok:.0f} | "
              f"{1e6 * s['client_cpu_s'] / tok:.0f} |")
    print()
    if openai_rec:
        c, r = openai_rec["level"]
        raw = best[("server", (c, r))] if (c, r) in args.level_list else None
        print(f"Client cost: level {c}:{r} through the official openai client (AsyncOpenAI): "
              f"{openai_rec['wall_s']:.2f} s, {r / openai_rec['wall_s']:.2f} req/s, "
              f"TTFT p50 {1e3 * pct(openai_rec['ttft'], 50):.1f} ms, ITL p50 {1e3 * pct(openai_rec['itl'], 50):.2f} ms, "
              f"client CPU {1e6 * openai_rec['client_cpu_s'] / openai_rec['tokens']:.0f} µs/token"
              + (f" (raw asyncio client at this level: {1e6 * raw['client_cpu_s'] / raw['tokens']:.0f} µs/token)."
                 if raw else "."))
        print()
    print(f"Server RSS (MiB): after start-up {rss['start']:.1f}; "
          + "; ".join(f"after level {c}:{r} {rss[(c, r)]:.1f}" for c, r in args.level_list)
          + f"; peak (VmHWM) {rss['hwm']:.1f}.")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="build dir holding deepinfer and server_engine_bench")
    p.add_argument("--model", default="tests/fixtures/v41_tiny_f32")
    p.add_argument("--levels", default="1:8,16:32,64:128,200:200", help="concurrency:requests, comma separated")
    p.add_argument("--prompt-len", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--max-num-batched-tokens", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--openai-level", default="16:32", help="C:R run once through the openai client ('' to skip)")
    p.add_argument("--http-threads", type=int, default=min(4, os.cpu_count() or 1), help="the server's io threads")
    args = p.parse_args()
    try:
        args.level_list = [tuple(int(x) for x in lv.split(":")) for lv in args.levels.split(",")]
        args.openai_level = tuple(int(x) for x in args.openai_level.split(":")) if args.openai_level else None
        assert all(len(lv) == 2 and lv[0] > 0 and lv[1] > 0 for lv in args.level_list + [args.openai_level or (1, 1)])
    except (ValueError, AssertionError):
        p.error(f"--levels / --openai-level must be C:R[,C:R...] with positive integers, got '{args.levels}' / "
                f"'{args.openai_level}'")
    for name in ("deepinfer", "server_engine_bench"):
        if not os.access(os.path.join(args.build, name), os.X_OK):
            p.error(f"{args.build}/{name} is missing: ninja -C {args.build} deepinfer server_engine_bench")

    started, t0 = datetime.datetime.now(datetime.timezone.utc), time.time()
    server = Server(args)
    rss = {"start": proc_status(server.proc.pid, "VmRSS")}
    # Warm-up (first-touch allocations), as server_engine_bench does before its levels.
    asyncio.run(drive(server.port, args, 4, 4))
    runs, loads, engine_cmd, openai_rec = [], [os.getloadavg()[0]], "", None
    try:
        # Level by level, the three sides back to back, so that the machine's load (other
        # processes come and go) drifts as little as possible between the numbers compared.
        for rep in range(args.repeats):
            for level in args.level_list:
                rec = server_level(server, args, *level)
                rss[level] = rec["rss_after_mib"]
                runs.append(rec)
                line = f"[repeat {rep}] {level[0]}:{level[1]} server {rec['wall_s']:.2f} s"
                for mode in ("sync", "async"):
                    rec, cmd = engine_level(args, mode, *level)
                    engine_cmd = engine_cmd or cmd
                    runs.append(rec)
                    line += f", engine {mode} {rec['wall_s']:.2f} s"
                print(f"{line}; load {os.getloadavg()[0]:.2f}", file=sys.stderr)
        if args.openai_level:
            openai_rec = asyncio.run(drive_openai(server.port, args, *args.openai_level))
            openai_rec["level"] = args.openai_level
        rss["hwm"] = proc_status(server.proc.pid, "VmHWM")
    finally:
        rc = server.stop()
    if rc != 0:
        raise SystemExit(f"server exited with {rc} on SIGTERM")
    # Each number is the minimum over the repeats (the least disturbed one); the latency
    # percentiles come from the repeat with the shortest wall time.
    best = {}
    for r in runs:
        key = (r["mode"], (r["concurrency"], r["requests"]))
        loads += list(r["load"])
        if key not in best:
            best[key] = dict(r, wall_max_s=r["wall_s"])
            continue
        b = best[key]
        keep = {k: min(b[k], r[k]) for k in ("cpu_s", "http_threads_cpu_s", "client_cpu_s") if k in r}
        keep["wall_max_s"] = max(b["wall_max_s"], r["wall_s"])
        if r["wall_s"] < b["wall_s"]:
            best[key] = b = dict(r)
        b.update(keep)
    report(args, best, rss, loads, engine_cmd, openai_rec, started, time.time() - t0)


if __name__ == "__main__":
    main()
