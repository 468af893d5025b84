"""What the hostile-client scripts read about the server they load: its resident memory."""


def rss_mib(pid):
    """The process's resident set size in MiB, from /proc."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0
