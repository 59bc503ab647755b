"""Hostile programs shared by the containment tests (a Pool) and the adversarial suite (a real
`serve code_tests`): each prints `contained` when every attempt failed, or what got through."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MEMORY_OVER_CHILDREN = (
    "import os\nkids = []\nfor _ in range(6):\n    pid = os.fork()\n    if pid == 0:\n"
    "        block = b'x' * (200 << 20)\n        import time; time.sleep(1.5)\n        os._exit(0)\n    kids.append(pid)\n"
    "lived = sum(os.waitpid(k, 0)[1] == 0 for k in kids)\n"
    "print('contained' if lived * 200 <= 512 else f'leak: {lived} children of 200 MB lived')"
)
"""Six children of 200 MB under a 512 MB limit: the run's bound, not each process's."""

UNMAPPED_MEMORY = (
    "import os, time\nfds = [os.memfd_create(f'm{i}') for i in range(8)]\n"
    "if os.fork() == 0:\n    time.sleep(60)\n    os._exit(0)\n"  # holds the memfds: killing the program frees none of it
    "for fd in fds:\n    if os.fork() == 0:\n        block = b'x' * (1 << 20)\n"
    "        for _ in range(48):\n            os.write(fd, block)\n        time.sleep(60)\n        os._exit(0)\n"
    "time.sleep(60)"
)
"""384 MB in memfds no process maps, held by a sleeping child, under a 256 MB bound: the
kernel's OOM killer must end the run's processes, never the runner that reports on them."""

DISK_BYTES_AND_FILES = (
    "import os\nwritten = 0\ntry:\n    with open('big', 'wb') as f:\n        for _ in range(1024):\n"
    "            f.write(b'x' * (1 << 20))\n            f.flush()\n            written += 1\nexcept OSError:\n    pass\n"
    "os.remove('big')\nfiles = 0\ntry:\n    for i in range(200_000):\n        open(f'f{i}', 'w').close()\n        files += 1\n"
    "except OSError:\n    pass\nok = written <= 64 and files <= 4096\n"
    "print('contained' if ok else f'leak: {written} MB, {files} files')"
)
"""1 GB into one file, then 200,000 files: the run's tmpfs (64 MB, 4,096 inodes) stops both."""

DEEP_DIRECTORIES = (
    "import os\ndepth = 0\ntry:\n    for _ in range(10_000):\n        os.mkdir('d')\n        os.chdir('d')\n        depth += 1\n"
    "except OSError:\n    pass\nprint('contained' if depth < 4096 else f'leak: {depth}')"
)
"""Nested directories until refused."""

SYSV_MAKE = (
    "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nshm = libc.shmget(0x4747, 64 << 20, 0o1000 | 0o666)\n"
    "libc.shmat.restype = ctypes.c_void_p\nif shm >= 0:\n    ctypes.memset(libc.shmat(shm, None, 0), 1, 64 << 20)\n"
    "q = libc.msgget(0x4748, 0o1000 | 0o666)\nprint('made' if shm >= 0 and q >= 0 else 'refused')"
)
"""SysV shared memory (touched) and a message queue, left behind."""

SYSV_LOOK = (
    "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nfound = []\n"
    "if libc.shmget(0x4747, 0, 0) >= 0:\n    found.append('shared memory')\nif libc.msgget(0x4748, 0) >= 0:\n    found.append('message queue')\n"
    "print('leak: ' + ', '.join(found) if found else 'contained')"
)
"""A later run looking for them."""

KERNEL_REFUSALS = (
    "import ctypes, os, shutil, subprocess\nlibc = ctypes.CDLL(None, use_errno=True)\nleaks = []\n"
    "nr = {'x86_64': (248, 250), 'aarch64': (217, 219)}[os.uname().machine]\n"
    "if libc.syscall(nr[0], b'user', b'gm', b'secret', 6, -4) >= 0:\n    leaks.append('add_key')\n"
    "if libc.syscall(nr[1], 0, -4, 0) >= 0:\n    leaks.append('keyctl')\n"  # KEYCTL_GET_KEYRING_ID of @u
    "if libc.unshare(0x10000000) == 0:\n    leaks.append('unshare(CLONE_NEWUSER)')\n"
    "if shutil.which('unshare') and subprocess.run(['unshare', '-Urm', 'true'], capture_output=True).returncode == 0:\n"
    "    leaks.append('unshare -Urm')\n"
    "if libc.mount(b'tmpfs', b'.', b'tmpfs', 0, None) == 0:\n    leaks.append('mount')\n"
    "print('leak: ' + ', '.join(leaks) if leaks else 'contained')"
)
"""The kernel keyring, a user namespace (and so a tmpfs past the memory limit), a mount."""

ROOT_POWER = (
    "import ctypes, os, struct\nlibc = ctypes.CDLL(None, use_errno=True)\nleaks = []\n"
    "status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines() if ':' in l)\n"
    "leaks += [f'{k}={status[k].strip()}' for k in ('CapEff', 'CapPrm', 'CapBnd', 'CapAmb') if int(status[k], 16)]\n"
    "handle = ctypes.create_string_buffer(struct.pack('IiII', 8, 1, 2, 0))\n"  # an ext4 handle of inode 2: a file system's root
    "fd = libc.open_by_handle_at(os.open('/etc', os.O_RDONLY), handle, os.O_RDONLY | os.O_DIRECTORY)\n"
    "if fd >= 0:\n    leaks.append('open_by_handle_at')\n"
    "print('leak: ' + ', '.join(leaks) if leaks else f'contained uid={os.getuid()}')"
)
"""Root's power from inside a run: capabilities in any set, and a file opened by handle
(which reaches any inode of a mounted file system, past every mount the run was given)."""

HOST_SOCKETS = (
    "import json, os, socket, sys\nleaks = []\nfor path in json.loads(sys.stdin.read()):\n    try:\n"
    "        socket.socket(socket.AF_UNIX).connect(path)\n        leaks.append(path)\n    except OSError:\n        pass\n"
    "for seen in ('/home', '/var', '/run', '/srv', '/mnt'):\n    if os.path.exists(seen):\n        leaks.append(seen)\n"
    "print('leak: ' + ' '.join(leaks) if leaks else 'contained')"
)
"""Unix sockets of the host (stdin: their paths), and the host places that hold them."""

BIG_PROGRAM = "# " + "x" * (600 << 10) + "\nprint('contained')"
"""600 KB of source (a program once had to fit one socket message)."""


@contextmanager
def unix_listeners(places: list[Path]) -> Iterator[str]:
    """Unix sockets listening at `places` (anyone may connect) while it lasts: HOST_SOCKETS'
    stdin."""
    listeners = []
    try:
        for place in places:
            listener = socket.socket(socket.AF_UNIX)
            listeners.append(listener)
            listener.bind(str(place))
            place.chmod(0o777)
            listener.listen()
        yield json.dumps([str(p) for p in places])
    finally:
        for listener in listeners:
            listener.close()
        for place in places:
            place.unlink(missing_ok=True)
