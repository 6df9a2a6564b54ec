"""Streaming load generator for `deepinfer serve` (or any OpenAI-compatible server).

    python3 bench/server/load.py --url http://127.0.0.1:8000/v1 --concurrency 1,16,64 \
        --requests 128 --max-tokens 64 [--api-key KEY] [--model NAME]

For each concurrency level it keeps that many streaming completions in flight until
--requests have finished and prints requests/s, output tokens/s, and TTFT and
inter-token latency percentiles (measured at the client, from SSE chunk arrival).
Results are for the record (bench/results/), never asserted on.
"""
import argparse
import asyncio
import statistics
import time

import openai


def pct(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


async def one(client, args, i, ttft, itl, tokens):
    start = time.perf_counter()
    last = None
    stream = await client.completions.create(model=args.model, prompt=f"{args.prompt} {i}", max_tokens=args.max_tokens,
                                             temperature=0, stream=True,
                                             stream_options={"include_usage": True},
                                             extra_body={"ignore_eos": True})
    async for chunk in stream:
        now = time.perf_counter()
        if chunk.usage:
            tokens.append(chunk.usage.completion_tokens)
        if not chunk.choices or not chunk.choices[0].text:
            continue
        if last is None:
            ttft.append(now - start)
        else:
            itl.append(now - last)
        last = now


async def level(args, concurrency):
    client = openai.AsyncOpenAI(base_url=args.url, api_key=args.api_key, max_retries=0, timeout=600)
    ttft, itl, tokens = [], [], []
    queue = iter(range(args.requests))

    async def worker():
        for i in queue:
            await one(client, args, i, ttft, itl, tokens)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    await client.close()
    print(f"concurrency {concurrency:4d}: {args.requests / elapsed:8.2f} req/s  {sum(tokens) / elapsed:9.1f} tok/s  "
          f"TTFT p50 {pct(ttft, 50) * 1e3:7.1f} ms p99 {pct(ttft, 99) * 1e3:7.1f} ms  "
          f"ITL p50 {pct(itl, 50) * 1e3:6.2f} ms p99 {pct(itl, 99) * 1e3:6.2f} ms  "
          f"(mean tokens {statistics.mean(tokens) if tokens else 0:.1f})")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8000/v1")
    p.add_argument("--api-key", default="none")
    p.add_argument("--model", default=None, help="default: the server's first model")
    p.add_argument("--concurrency", default="1,8,64")
    p.add_argument("--requests", type=int, default=128)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--prompt", default="Write a story about request number")
    args = p.parse_args()
    if args.model is None:
        args.model = openai.OpenAI(base_url=args.url, api_key=args.api_key).models.list().data[0].id
    for c in (int(x) for x in args.concurrency.split(",")):
        asyncio.run(level(args, c))


if __name__ == "__main__":
    main()
