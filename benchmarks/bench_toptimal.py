"""Speed of the TOptimal and ATOptimal dynamic programmes against plain-Python versions of the same DP.

Goals (issue 3): TOptimal with n = 1,000 under 50 ms and n = 10,000 under 2 s; ATOptimal with n = 100
under 1 s. Each line prints the time (best of several runs), the goal, and the ratio to a naive
double-loop Python implementation measured in the same run on the same input (both must agree).

Run: ``.venv/bin/python benchmarks/bench_toptimal.py`` (a few seconds).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from functools import cache
from typing import Any

from scipy import stats

from elastic.learners.toptimal import atoptimal, toptimal
from elastic.learners.walltime import ESDD, esdd

TABLE1 = stats.truncnorm(-4, 6, loc=8, scale=2)  # the paper's Table 1: mu 8 h, sigma 2 h on [0, 20] h


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def naive_toptimal(d: ESDD) -> float:
    """The same DP (alpha=1, beta=0, gamma=0) with two Python loops: O(n^2) scalar steps."""
    v, f = d.values.tolist(), d.probs.tolist()
    n = len(v) - 1
    survival = [0.0] * (n + 2)
    for i in range(n, -1, -1):
        survival[i] = survival[i + 1] + f[i]
    cost = [0.0] * (n + 2)  # cost[i + 1]: runtime known to exceed v_i; cost[0]: start
    for state in range(n, -1, -1):
        best = float("inf")
        for j in range(state, n + 1):
            if j < n and survival[state] - survival[j + 1] <= 0:
                continue
            c = survival[state] * v[j] + (cost[j + 1] if j < n else 0.0)
            best = min(best, c)
        cost[state] = best
    return cost[0]


def naive_atoptimal(d: ESDD, zeta: float) -> float:
    """The same ATOptimal DP (same closed-form cut-off) as a memoised Python recursion with loops."""
    v, f = d.values.tolist(), d.probs.tolist()
    n = len(v) - 1
    cum_f, cum_fv = [0.0], [0.0]
    for value, p in zip(v, f, strict=True):
        cum_f.append(cum_f[-1] + p)
        cum_fv.append(cum_fv[-1] + p * value)
    delta = (v[-1] - v[0]) / n

    @cache
    def best(i: int, k: int, m: int) -> float:  # requests so far sum to m * v_0 + k * delta
        s = m * v[0] + k * delta
        if i >= 0 and zeta > 0 and s >= ((1 - zeta) * v[n] - v[i + 1]) / zeta:
            return (s * (1 - cum_f[i + 1]) + cum_fv[n + 1] - cum_fv[i + 1]) / (1 - zeta)  # request v_n
        result = float("inf")
        for j in range(i + 1, n + 1):
            if j < n and cum_f[j + 1] - cum_f[i + 1] <= 0:
                continue
            s_next = s + v[j]
            # last outcome whose makespan is the reservations' sum
            x = min(max(bisect.bisect_right(v, (1 - zeta) * s_next - s) - 1, i), j)
            c = s_next * (cum_f[x + 1] - cum_f[i + 1])
            c += (s * (cum_f[j + 1] - cum_f[x + 1]) + cum_fv[j + 1] - cum_fv[x + 1]) / (1 - zeta)
            if j < n:
                c += best(j, k + j, m + 1 if v[0] else 0)  # m only matters when v_0 > 0
            result = min(result, c)
        return result

    return best(-1, 0, 0)


def main() -> None:
    print("TOptimal / ATOptimal on the Table 1 distribution (truncnorm mu=8 sigma=2 on [0, 20] h)")
    naive_1000 = None
    for n, goal, repeat in ((1_000, 0.050, 7), (10_000, 2.0, 3)):
        d = esdd(TABLE1, 0.0, 20.0, n)
        seconds, seq = best_of(lambda d=d: toptimal(d.values, d.probs), repeat)
        if n == 1_000:
            naive_1000, reference = best_of(lambda d=d: naive_toptimal(d), 1)
            assert abs(reference - seq.expected_cost) < 1e-9, (reference, seq.expected_cost)
            naive, how = naive_1000, "measured"
        else:
            assert naive_1000 is not None
            naive, how = naive_1000 * (n / 1_000) ** 2, "extrapolated n^2 from n=1,000"
        status = "ok" if seconds < goal else "MISSED"
        print(
            f"TOptimal  n={n:>6,}: {seconds * 1e3:8.1f} ms (goal < {goal * 1e3:,.0f} ms, {status}); "
            f"naive Python loops {naive:8.2f} s ({how}) -> {naive / seconds:6.1f}x faster"
        )
    d = esdd(TABLE1, 0.0, 20.0, 100)
    for zeta in (0.1, 0.5, 0.9):
        seconds, seq = best_of(lambda zeta=zeta: atoptimal(d.values, d.probs, zeta=zeta), 3)
        naive, reference = best_of(lambda zeta=zeta: naive_atoptimal(d, zeta), 1)
        assert abs(reference - seq.expected_cost) < 1e-9, (zeta, reference, seq.expected_cost)
        status = "ok" if seconds < 1.0 else "MISSED"
        print(
            f"ATOptimal n=   100 zeta={zeta:<4}: {seconds * 1e3:8.1f} ms (goal < 1,000 ms, {status}); "
            f"naive Python recursion {naive:6.2f} s -> {naive / seconds:6.1f}x faster; "
            f"requests {', '.join(f'{t:.1f}' for t in seq.requests)} h"
        )
    # Small zeta is the worst case (few states reach the closed form); no naive reference (minutes).
    seconds, seq = best_of(lambda: atoptimal(d.values, d.probs, zeta=0.01), 1)
    print(f"ATOptimal n=   100 zeta=0.01: {seconds * 1e3:8.1f} ms (worst case, informative)")


if __name__ == "__main__":
    main()
