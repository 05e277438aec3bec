"""`yard exec -it` driven from a pseudo-terminal of the test's own (the
CLI's stdin, stdout, stderr and controlling terminal), for the exec tests
of test_exec.py and test_containers.py."""
import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import time

from harness import YARD, check, check_eq, wait_until

SH = "/bin/sh"


def cli_env(c, token=None):
    e = c.env({"YARD_MASTER": c.url, "YARD_TOKEN": token or c.admin_token, "HOME": c.dir})
    if c.pin:
        e["YARD_PIN"] = c.pin
    return e


class PtyCli:
    """`yard ARGS` on a pseudo-terminal of ours: its stdin, stdout and stderr
    and its controlling terminal, rows x cols."""

    def __init__(self, c, args, rows=24, cols=80, token=None):
        self.c = c
        self.master, self.slave = os.openpty()
        self.resize(rows, cols)
        self.buf = b""

        def ctty():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.p = subprocess.Popen([YARD, *args], stdin=self.slave, stdout=self.slave, stderr=self.slave,
                                  env=cli_env(c, token), start_new_session=True, preexec_fn=ctty)

    def resize(self, rows, cols):
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def send(self, data):
        os.write(self.master, data)

    def _read(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the CLI has exited and closed its side
            return False
        self.buf += data
        return bool(data)

    def expect(self, pattern, timeout=15):
        """The first match of pattern (bytes) in what the CLI wrote since the
        last match; what came before it is dropped."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.buf)
            if m:
                self.buf = self.buf[m.end():]
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {pattern!r}; the terminal shows {self.buf[-2000:]!r}")
            self._read(min(left, 0.5))

    def wait(self, timeout=15):
        deadline = time.monotonic() + timeout
        while self.p.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        check(self.p.poll() is not None, f"yard exec ended within {timeout}s; it shows {self.buf[-2000:]!r}")
        while self._read(0):
            pass
        self.c.scan_text(self.buf.decode(errors="replace"), "yard exec")
        return self.p.returncode

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        os.close(self.master)
        os.close(self.slave)


def check_restored(cli):
    """The CLI gave the terminal back as it found it: canonical, echoing."""
    lflag = termios.tcgetattr(cli.slave)[3]
    check(lflag & termios.ICANON and lflag & termios.ECHO, f"the terminal is cooked again (lflag {lflag:#x})")


def shell_session(c, jid, prompt_cmd=b"tty; stty size\n", token=None):
    """An interactive shell in job jid's task on a 30x100 terminal: its tty,
    its size, a resize to 40x120, ^C to a sleep, and exit 3."""
    cli = PtyCli(c, ["exec", "-it", str(jid), "--", SH], rows=30, cols=100, token=token)
    try:
        cli.expect(rb"[#$] $")  # the shell's prompt: it reads its terminal now
        cli.send(prompt_cmd)
        cli.expect(rb"/dev/pts/\d+\r\n30 100\r\n")
        cli.resize(40, 120)  # the kernel tells the CLI (SIGWINCH), the CLI the task

        def resized():
            cli.send(b"stty size\n")
            return cli.expect(rb"(\d+ \d+)\r\n").group(1) == b"40 120"
        wait_until(resized, 15, "the task's terminal resized to 40x120", interval=0.05)
        # the sleep says it is about to run (in the terminal's foreground job)
        cli.send(b"sh -c 'echo armed; exec sleep 30'\n")
        cli.expect(rb"armed\r\n")  # not the echo: "armed;"
        cli.send(b"\x03")  # ^C: a byte through the terminal, a SIGINT in the task
        cli.send(b"echo after $?\n")
        cli.expect(rb"after 130\r\n")
        cli.send(b"exit 3\n")
        check_eq(cli.wait(), 3, "yard exec's status is the shell's")
        check_restored(cli)
    finally:
        cli.close()


def exec_in_container(c, jid, image_line):
    """`yard exec` into the container task of job jid, whose image has
    image_line in /etc/yard-image: -it (the shell session), the status
    and stderr apart, and stdin byte for byte through the engine."""
    shell_session(c, jid, prompt_cmd=b"cat /etc/yard-image; tty; stty size\n")
    r = c.cli("exec", str(jid), "--", "/bin/bash", "-c", "cat /etc/yard-image; echo err >&2; exit 6")
    check_eq((r.returncode, r.stdout, r.stderr), (6, image_line, b"err\n"),
             "yard exec in the container: its filesystem, stderr apart, the status")
    data = bytes(range(256)) * 1024
    r = c.cli("exec", "-i", str(jid), "--", "cat", input=data, check_rc=0)
    check(r.stdout == data, f"stdin through the engine byte for byte ({len(r.stdout)} bytes)")
