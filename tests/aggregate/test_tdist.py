"""Student-t quantiles (statistics/_tdist.py): within 1e-14 of the exact value, on every Python.

The reference values are the exact quantiles (mpmath, 40 digits: betainc solved by findroot)
rounded to float64. scipy's own stdtrit is not the reference: scipy 1.15 (the last for Python
3.10, Cephes) is up to ~5e-11 off, which broke conformance with NeMo Gym on 3.10.
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from gym_metrics.aggregate._stats import t_critical
from gym_metrics.statistics._tdist import EXACT_DF, t_quantile

# (df, two-sided confidence, exact critical value rounded to float64)
EXACT = [
    (1, 0.95, 12.706204736174694),
    (2, 0.95, 4.302652729749462),
    (3, 0.95, 3.1824463052837086),
    (4, 0.95, 2.7764451051977934),
    (5, 0.95, 2.5705818356363146),
    (6, 0.95, 2.4469118511449692),
    (9, 0.95, 2.262157162798205),
    (10, 0.95, 2.2281388519862744),
    (29, 0.95, 2.045229642132704),
    (30, 0.95, 2.0422724563012378),
    (99, 0.95, 1.9842169515864172),
    (100, 0.95, 1.9839715185235518),
    (999, 0.95, 1.9623414611334495),
    (1000, 0.95, 1.962339080826408),
    (1999, 0.95, 1.9611514201705615),
    (2000, 0.95, 1.9611508260994377),
    (2001, 0.95, 1.961150232622441),
    (10000, 0.95, 1.960201239890626),
    (1000000, 0.95, 1.9599663568141066),
    (1, 0.99, 63.656741162871526),
    (2, 0.99, 9.92484320091829),
    (3, 0.99, 5.840909309733355),
    (4, 0.99, 4.604094871349992),
    (5, 0.99, 4.032142983555227),
    (6, 0.99, 3.707428021324779),
    (9, 0.99, 3.249835541592126),
    (10, 0.99, 3.169272672616951),
    (29, 0.99, 2.7563859036706053),
    (30, 0.99, 2.749995653567225),
    (99, 0.99, 2.626405457280827),
    (100, 0.99, 2.6258905214380177),
    (999, 0.99, 2.5807596372676365),
    (1000, 0.99, 2.5807546980659506),
    (1999, 0.99, 2.5782910195219233),
    (2000, 0.99, 2.5782897875575186),
    (2001, 0.99, 2.578288556825569),
    (10000, 0.99, 2.5763210466685287),
    (1000000, 0.99, 2.575834220105334),
]


@pytest.mark.parametrize(("df", "confidence", "exact"), EXACT)
def test_critical_value_is_within_1e_14_of_exact(df: int, confidence: float, exact: float) -> None:
    got = t_critical(df, confidence)
    assert abs(got - exact) <= 1e-14 * exact, (got, exact)
    if confidence == 0.95:  # better conditioned than 99%: a few ulps
        assert abs(got - exact) <= 8 * math.ulp(exact), (got, exact)
    assert t_quantile(df, 0.5 - confidence / 2) == -got  # symmetric


def test_agrees_with_scipy_where_scipy_is_exact() -> None:
    """scipy >= 1.16 (Boost's stdtrit, NeMo Gym 0.7.0's reference on Python 3.13) agrees to 1e-14."""
    scipy = pytest.importorskip("scipy")
    if tuple(int(x) for x in scipy.__version__.split(".")[:2]) < (1, 16):
        pytest.skip(f"scipy {scipy.__version__} uses Cephes' stdtrit, off by up to ~5e-11")
    from scipy.special import stdtrit

    for df in [*range(1, 400), 1999, 2000, 2001, 123_456]:
        for p in (0.95, 0.975, 0.995):
            assert t_quantile(df, p) == pytest.approx(float(stdtrit(df, p)), rel=1e-14, abs=0), (df, p)


def test_edges_and_bad_input() -> None:
    assert {EXACT_DF, EXACT_DF + 1} <= {df for df, _, _ in EXACT}  # both sides of the method switch
    assert t_quantile(7, 0.5) == 0.0
    assert t_quantile(7, 1.0) == math.inf and t_quantile(7, 0.0) == -math.inf
    for df in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="df"):
            t_quantile(df, 0.975)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="p must be"):
        t_quantile(3, 1.5)


def test_intervals_do_not_import_scipy() -> None:
    code = (
        "import sys\n"
        "from gym_metrics.aggregate._stats import t_interval\n"
        "assert t_interval(1.0, 0.5, 10) is not None\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
