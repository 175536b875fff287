"""Running one tool command line under a timeout (`run_tool`)."""

import os
import signal
import subprocess
import time

from .model import Res


def first_line(b):
    for line in b.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:160]
    return ""


def run_tool(bin_dir, argv, cwd, timeout, env=None, stdin=b"", stdout="pipe"):
    e = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    t0 = time.monotonic()
    out_f = subprocess.PIPE
    if stdout == "devfull":
        out_f = open("/dev/full", "wb")
    elif stdout == "closed":
        r, w = os.pipe()
        os.close(r)
        out_f = w
    try:
        p = subprocess.Popen(argv, cwd=cwd, env=e, stdin=subprocess.PIPE, stdout=out_f, stderr=subprocess.PIPE,
                             start_new_session=True)
    finally:
        if stdout == "devfull":
            out_f.close()
        elif stdout == "closed":
            os.close(out_f)
    try:
        o, er = p.communicate(stdin, timeout=timeout)
        return Res(p.returncode, o or b"", er or b"", time.monotonic() - t0, False)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        o, er = p.communicate()
        return Res(-9, o or b"", er or b"", time.monotonic() - t0, True)
