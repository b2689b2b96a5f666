"""The command line's subcommands, one module each (or one per closely related pair), on top of
every other layer: each module holds its subcommands' options (a function that adds them to the
subcommand's parser) and their handlers (the parsed command line in, the exit status out), and
:data:`COMMANDS` lists them in the order ``udtbed --help`` shows them. ``shared`` holds what
several subcommands use: the experiments a command line selects, the run's scale, the sweep of
gone runs, the signals that end a command as Ctrl-C does, the checkout's commit.
``udtbed.__main__`` builds the parser from the table and dispatches on it.
"""

from .calibrate import CALIBRATE
from .catalog import CHECK, LIST
from .cleanup import CLEANUP
from .cluster import LAB, PREFLIGHT
from .compare import COMPARE, GATE
from .compare_backends import COMPARE_BACKENDS
from .cores import CORES
from .report import REPORT
from .run import RUN
from .shared import Command
from .simulate import NS2_CHECK, SIMULATE
from .vm import VM

COMMANDS: tuple[Command, ...] = (
    RUN,
    REPORT,
    COMPARE,
    GATE,
    CORES,
    CHECK,
    LIST,
    CALIBRATE,
    CLEANUP,
    PREFLIGHT,
    LAB,
    SIMULATE,
    NS2_CHECK,
    COMPARE_BACKENDS,
    VM,
)

__all__ = ["COMMANDS", "Command"]
