#!/usr/bin/env python3
"""Draws `make bench`'s chart from the bench's JSON (`bench --json-out PATH`).

    scripts/bench_chart.py target/bench/bench.json docs/benchmarks.png

One PNG, two panels: (a) AWS requests (and, when the JSON has them, DynamoDB request units) per
delivery for each scenario, against the targets; (b) deliveries per second for each scenario,
with the emulator's own conditional write rate measured in the same run.
Needs matplotlib (scripts/requirements-bench.txt, installed into .venv by scripts/bench.sh).
"""

import textwrap
import datetime
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

# (JSON key, label, colour, target per delivery or None)
SERIES = [
    ("dynamodb_writes_per_delivery", "DynamoDB writes", "#1f77b4", 3.0),
    ("dynamodb_write_units_per_delivery", "DynamoDB write units", "#aec7e8", None),
    ("dynamodb_reads_per_delivery", "DynamoDB reads", "#2ca02c", None),
    ("dynamodb_read_units_per_delivery", "DynamoDB read units", "#98df8a", None),
    ("sqs_requests_per_delivery", "SQS requests", "#ff7f0e", 0.3),
    ("lambda_invocations_per_delivery", "Lambda invocations", "#9467bd", 0.05),
]
# Bars this small (or zero) are drawn at the axis floor with their value written on them.
FLOOR = 0.005


def run_date(doc, path):
    if doc.get("date"):
        return str(doc["date"])
    return datetime.date.fromtimestamp(os.path.getmtime(path)).isoformat()


def requests_panel(ax, scenarios):
    series = [s for s in SERIES if any(s[0] in row for row in scenarios)]
    names = [row["scenario"] for row in scenarios]
    width = 0.8 / max(len(series), 1)
    for i, (key, label, colour, _target) in enumerate(series):
        # A scenario without the figure gets no bar (zero gets one, at the floor).
        present = [(j, float(row[key] or 0.0)) for j, row in enumerate(scenarios) if key in row]
        xs = [j + (i - (len(series) - 1) / 2) * width for j, _ in present]
        values = [v for _, v in present]
        bars = ax.bar(
            xs,
            [max(v, FLOOR) for v in values],
            width,
            label=label,
            color=colour,
            edgecolor="white",
            linewidth=0.5,
            hatch="//" if "units" in key else None,
        )
        for bar, v in zip(bars, values):
            ax.annotate(
                f"{v:.2f}" if v >= 0.1 or v == 0 else f"{v:.3f}",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=6.5,
                rotation=90,
            )
    for key, label, colour, target in series:
        if target is not None:
            ax.axhline(
                target,
                color=colour,
                linestyle="--",
                linewidth=1.2,
                label=f"target: ≤ {target:g} {label}",
            )
    ax.set_yscale("log")
    top = max(
        [float(row.get(k, 0.0) or 0.0) for row in scenarios for k, *_ in series] + [3.0]
    )
    ax.set_ylim(FLOOR, top * 25)
    ax.set_xticks(range(len(names)))
    # Nine scenarios and more: their names wrapped and slanted, so that none overlaps the next.
    ax.set_xticklabels([textwrap.fill(n, 18) for n in names], rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("per delivered change (log scale)")
    ax.set_title("(a) AWS requests per delivery; dashed: targets")
    ax.legend(fontsize=8, ncol=3, loc="upper center")
    ax.grid(axis="y", which="major", alpha=0.3)


def throughput_panel(ax, scenarios, raw_rate):
    names = [row["scenario"] for row in scenarios]
    rates = [float(row.get("deliveries_per_second", 0.0) or 0.0) for row in scenarios]
    bars = ax.bar(range(len(names)), rates, 0.55, color="#17becf")
    for bar, v in zip(bars, rates):
        ax.annotate(
            f"{v:.1f}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            xytext=(0, 2),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([textwrap.fill(n, 18) for n in names], rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("deliveries per second")
    ax.set_ylim(0, max(rates + [1.0]) * 1.2)
    title = "(b) throughput on the local emulator"
    if raw_rate:
        title += f" (its own conditional writes: {float(raw_rate):.0f}/s)"
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    source, target = argv[1], argv[2]
    with open(source, encoding="utf-8") as f:
        doc = json.load(f)
    scenarios = doc.get("scenarios") or []
    if not scenarios:
        print(f"bench_chart: no scenarios in {source}", file=sys.stderr)
        return 1
    fig, (a, b) = plt.subplots(
        2, 1, figsize=(11, 10), gridspec_kw={"height_ratios": [3, 2]}
    )
    requests_panel(a, scenarios)
    throughput_panel(b, scenarios, doc.get("emulator_conditional_writes_per_second"))
    fig.suptitle(
        f"Rhythm delivery pipeline benchmark, {run_date(doc, source)}: "
        f"{doc.get('changes', '?')} changes per scenario, one subscription",
        fontsize=12,
    )
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    fig.savefig(target, dpi=110)
    print(f"bench_chart: wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
