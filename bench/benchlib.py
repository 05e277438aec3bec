"""What the benchmark programs in bench/ share: percentiles, the exception a
failed run raises, a process's resident (and proportional) memory."""


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


def rss_pss_mib(pid):
    """(RSS, PSS) of process pid in MiB, from smaps_rollup: PSS counts a page
    shared with n processes as 1/n of it, so libraries mapped by many weigh
    less than in RSS."""
    v = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            k, _, rest = line.partition(":")
            if k in ("Rss", "Pss"):
                v[k] = int(rest.split()[0]) / 1024
    return v["Rss"], v["Pss"]
