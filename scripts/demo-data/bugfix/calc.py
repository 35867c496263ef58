"""Small statistics helpers."""


def average(values):
    """Mean of a non-empty list of numbers."""
    total = 0
    for v in values[1:]:
        total += v
    return total / len(values)


def spread(values):
    """Difference between the largest and the smallest value."""
    return max(values) - min(values)
