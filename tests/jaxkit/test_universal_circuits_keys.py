"""Universal circuits: the stream without a class is resampled from the run's key (a named
stream), not from a fixed seed (issue 70: named keys instead of seed arithmetic)."""

import jax
import numpy as np

from jaxkit.universal_circuits.experiment import without_class


def test_the_excluded_class_is_resampled_from_the_run_key():
    y = np.arange(200) % 10
    a = without_class(jax.random.key(1), y, 3)
    assert np.all(y[a] != 3)
    np.testing.assert_array_equal(a[y != 3], np.flatnonzero(y != 3))  # identity elsewhere
    np.testing.assert_array_equal(a, without_class(jax.random.key(1), y, 3))
    assert not np.array_equal(a, without_class(jax.random.key(2), y, 3))
