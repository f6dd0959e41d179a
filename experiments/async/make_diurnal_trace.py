#!/usr/bin/env python3
"""Writes a client trace (client.system.trace_path) of daily availability.

Each device is online once a "day" of --day virtual seconds, for a share of it
drawn uniformly from [--min_online, --max_online], starting at a phase drawn
uniformly over the day (devices charge and sit on Wi-Fi at different hours),
for --days days; after them it stays online. Speeds and bandwidths are left to
the spec's draws (empty cells). Deterministic in --seed.

  python3 experiments/async/make_diurnal_trace.py --devices 1000 \
      --out experiments/async/diurnal_1000.csv
"""

import argparse
import random


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--day", type=float, default=1000.0)
    parser.add_argument("--days", type=int, default=20)
    parser.add_argument("--min_online", type=float, default=0.2)
    parser.add_argument("--max_online", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not 0 < args.min_online <= args.max_online < 1:
        parser.error("need 0 < min_online <= max_online < 1 (windows must stay apart)")
    rng = random.Random(args.seed)
    with open(args.out, "w") as out:
        out.write(f"# {args.devices} devices online once a {args.day:g} s day for "
                  f"{args.min_online:g}-{args.max_online:g} of it, {args.days} days, then "
                  f"always (make_diurnal_trace.py --seed {args.seed})\n")
        out.write("client,available\n")
        for device in range(args.devices):
            share = rng.uniform(args.min_online, args.max_online)
            phase = rng.uniform(0, args.day)
            windows = []
            # Day -1's window may reach into day 0.
            for day in range(-1, args.days):
                start = max(0.0, phase + day * args.day)
                end = phase + day * args.day + share * args.day
                if end > 0:
                    windows.append(f"{start:.1f}-{end:.1f}")
            windows.append(f"{phase + args.days * args.day:.1f}-inf")
            out.write(f"{device},{' '.join(windows)}\n")


if __name__ == "__main__":
    main()
