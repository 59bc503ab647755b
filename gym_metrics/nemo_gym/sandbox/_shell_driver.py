"""The program kept running in gym-metrics' sandbox for one NeMo Gym sandbox (standard library
only; it is the sandbox's `main.py`, never imported by the server). It reads requests from
stdin, each `NONCE SIZE\\n` then SIZE bytes of JSON, and answers each on stdout the same way,
carrying its nonce: `exec` runs a shell command (its own session, stdin empty, stdout and
stderr kept to their first GM_NEMO_OUTPUT_BYTES; at its timeout, which its output's end must
also meet, its process group is killed), `write` and `read` move a file, `workspace` makes a
directory the one relative paths start from (the spec's workdir, as NeMo Gym's), `kill` stops
the command of an `exec` whose caller went away. Requests run at once, each
in a thread, as NeMo Gym's local provider runs a sandbox's commands. Relative paths start from the
workspace, at first the sandbox's own directory; the commands never see the protocol's pipes."""

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time

CAP = READ_CAP = 0
BASE_ENV: dict[str, str] = {}
WORKSPACE = ""
replies = sys.stdout.buffer
lock = threading.Lock()
running: dict[bytes, subprocess.Popen[bytes]] = {}  # nonce -> the process of an exec request still running


def where(path):
    return os.path.join(WORKSPACE, path)  # an absolute path stays itself


def drain(pipe, kept):
    total = 0
    while True:
        chunk = pipe.read(65536)
        if not chunk:
            return
        if total < CAP:
            kept.append(chunk[: CAP - total])
        total += len(chunk)


def run(nonce, request):
    try:
        process = subprocess.Popen(
            [request["shell"], "-c", request["command"]], cwd=where(request.get("cwd") or WORKSPACE),
            env={**BASE_ENV, **request["env"]}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
        )
    except OSError as exc:
        return {"raise": type(exc).__name__, "message": str(exc)}
    running[nonce] = process
    out: list[bytes] = []
    err: list[bytes] = []
    readers = [threading.Thread(target=drain, args=(process.stdout, out)), threading.Thread(target=drain, args=(process.stderr, err))]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + request["timeout_s"]
    try:  # its output's end too, as a command left running with its pipes open holds NeMo Gym's
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
        for reader in readers:
            reader.join(max(0.0, deadline - time.monotonic()))
        timed_out = any(reader.is_alive() for reader in readers)
    except subprocess.TimeoutExpired:
        timed_out = True
    if timed_out:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        for reader in readers:
            reader.join(5.0)
    running.pop(nonce, None)
    text = lambda parts: b"".join(parts).decode(errors="replace")  # noqa: E731
    return {"stdout": text(out), "stderr": text(err), "return_code": process.returncode, "timed_out": timed_out}


def handle(nonce, request):
    op = request["op"]
    try:
        if op == "exec":
            return run(nonce, request)
        if op == "kill":  # its caller went away: the command and what it started
            process = running.get(request["nonce"].encode())
            if process is not None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            return {}
        path = where(request["path"])
        if op == "workspace":
            global WORKSPACE
            os.makedirs(path, exist_ok=True)
            WORKSPACE = path
            return {}
        if op == "write":
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "wb") as f:
                f.write(base64.b64decode(request["data"]))
            return {}
        if op == "read":
            size = os.stat(path).st_size
            if size > READ_CAP:
                return {"raise": "OSError", "message": f"{request['path']} holds {size:,} bytes, more than the {READ_CAP:,} a download may"}
            with open(path, "rb") as f:
                return {"data": base64.b64encode(f.read()).decode()}
        return {"raise": "ValueError", "message": f"unknown request {op!r}"}
    except OSError as exc:
        return {"raise": type(exc).__name__, "message": str(exc)}


def answer(nonce, request):
    data = json.dumps(handle(nonce, request)).encode()
    with lock:
        replies.write(b"%s %d\n" % (nonce, len(data)) + data)
        replies.flush()


def main():
    """Take the protocol's pipes for itself (the commands get /dev/null), then serve requests."""
    global CAP, READ_CAP, BASE_ENV, WORKSPACE, replies
    CAP = int(os.environ.pop("GM_NEMO_OUTPUT_BYTES"))
    READ_CAP = int(os.environ.pop("GM_NEMO_READ_BYTES"))
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    BASE_ENV, WORKSPACE = dict(os.environ), os.getcwd()
    while True:
        header = requests.readline()
        if not header:
            return
        nonce, size = header.split()
        request = json.loads(requests.read(int(size)))
        threading.Thread(target=answer, args=(nonce, request), daemon=True).start()


if __name__ == "__main__":
    main()
