"""The chart of `bench/results.md`: per data set, each contender's median rate relative to the best other tool
(a ceiling is drawn but is not a tool; ours on one core is ours, not another tool).

Run by `bench/all.py` with the peers' Python (matplotlib stays out of the product's environment):
`python bench/chart.py OUTPUT.png < results.json`.
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display; chosen before pyplot is imported
import matplotlib.pyplot as plt


def main(target: str) -> None:
    sets = json.load(sys.stdin)
    figure, axes = plt.subplots(len(sets), 1, figsize=(9, 1.1 + 0.42 * sum(len(s["medians"]) for s in sets)))
    for axis, data in zip(figure.axes if len(sets) > 1 else [axes], sets, strict=True):
        names = list(data["medians"])
        rates = [data["medians"][name] for name in names]
        ours = [name.startswith("initializers") for name in names]
        peers = [rate for name, rate, mine in zip(names, rates, ours, strict=True) if not (mine or "ceiling" in name)]
        best_peer = max(peers)
        colors = ["tab:green" if mine else "tab:gray" for mine in ours]
        axis.barh(names[::-1], [r / best_peer for r in rates][::-1], color=colors[::-1])
        for y, rate in enumerate(rates[::-1]):
            axis.text(rate / best_peer, y, f" {rate:.1f} {data['unit']}/s", va="center", fontsize=7)
        axis.axvline(1.0, color="black", linewidth=0.6)
        axis.set_title(data["title"], fontsize=9, loc="left")
        axis.tick_params(labelsize=7)
        axis.set_xlim(0, max(r / best_peer for r in rates) * 1.35)
    figure.supxlabel("median rate relative to the best other tool (1.0 = as fast)", fontsize=8)
    figure.tight_layout()
    figure.savefig(target, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1])
