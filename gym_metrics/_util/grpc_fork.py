"""grpc's fork handlers off in a serving process, so a verify that forks gets a working child.

grpcio's wheels build grpc core with fork support on: at every fork() its pthread_atfork
handlers pause grpc's threads, and in the child they restart its event engine, whose pollers
then run in the child on the parent's epoll set and sockets. Under a grpc.aio server a child
forked inside `verify` (math-verify's timeout, NeMo Gym's math_with_judge) died of SIGSEGV in
those threads: 9-17% of the children, each scored 0 by an environment that catches it.
With GRPC_ENABLE_FORK_SUPPORT=0 the handlers are not registered: the child is a plain copy
that runs only Python (every child lived, forks were faster). grpc reads the variable when it
is imported, so this runs before anything imports grpc. Nothing here imports grpc.
"""

from __future__ import annotations

import os
import sys

FORK_SUPPORT_ENV = "GRPC_ENABLE_FORK_SUPPORT"
"""grpc's own variable; a value the user set is kept (theirs wins)."""

_FALSE = ("0", "false", "no", "off")


def disable_grpc_fork_handlers() -> bool:
    """Set GRPC_ENABLE_FORK_SUPPORT=0 unless the user set it; call before grpc is imported.

    True when grpc in this process will run without its fork handlers; False when grpc is
    already imported (too late to change) or the user turned fork support on.
    """
    if "grpc" not in sys.modules:
        os.environ.setdefault(FORK_SUPPORT_ENV, "0")
    return grpc_fork_handlers_off()


def grpc_fork_handlers_off() -> bool:
    """Whether GRPC_ENABLE_FORK_SUPPORT says off (what grpc saw if it was set before import)."""
    return os.environ.get(FORK_SUPPORT_ENV, "").strip().lower() in _FALSE
