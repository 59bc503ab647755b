"""The sandbox's launcher: set the rlimits, run the program as its child, and report its exit
status and resource use (wait4) as one JSON line on the file descriptor it is given.

Usage: python -I -S _launch.py REPORT_FD CPU_S MEMORY_MB FILE_MB OPEN_FILES PROCESSES -- CMD...
"""

from __future__ import annotations

import json
import os
import resource
import sys


def main(argv: list[str]) -> int:
    report_fd, cpu, memory_mb, file_mb, open_files, processes = (int(x) for x in argv[:6])
    command = argv[7:]
    limits = {
        resource.RLIMIT_CPU: (cpu, cpu + 1),
        resource.RLIMIT_AS: (memory_mb << 20, memory_mb << 20),
        resource.RLIMIT_FSIZE: (file_mb << 20, file_mb << 20),
        resource.RLIMIT_NOFILE: (open_files, open_files),
        resource.RLIMIT_NPROC: (processes, processes),
        resource.RLIMIT_CORE: (0, 0),
    }
    pid = os.fork()
    if pid == 0:
        os.close(report_fd)
        try:
            for kind, value in limits.items():
                resource.setrlimit(kind, value)
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"sandbox: cannot run {command[0]!r}: {exc}\n".encode())
        os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    report = {"exit_code": code, "cpu_s": usage.ru_utime + usage.ru_stime, "max_rss_kb": usage.ru_maxrss}
    try:
        os.write(report_fd, json.dumps(report).encode())
    except OSError:
        pass
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
