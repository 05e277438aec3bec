"""What the benchmark programs in bench/ share: percentiles, the exception a
failed run raises, a process's resident memory."""


class RunFailed(Exception):
    """One measured run did not complete; the benchmark reports it and goes on."""


def pct(values, p):
    """The p-th percentile of values (nearest rank, no interpolation)."""
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def rss_mib(pid):
    """Resident memory of process pid in MiB (NaN once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")
