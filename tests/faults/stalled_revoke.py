"""``python -m tests.faults.stalled_revoke ...``: the ``kadence`` CLI, with the history
processor's and the timer service's revoke callbacks stalled.

The first time librdkafka hands the service partitions to give up (the first round of a
cooperative rebalance), the callback writes the file named by ``KADENCE_TEST_REVOKE_MARKER`` and
never returns, so the test can SIGKILL the process in the window between the two rounds of that
rebalance: the group has moved on to the new generation, and this member will never revoke and
rejoin. librdkafka's own threads go on heartbeating meanwhile, as they would in a process whose
main thread is busy when it is killed.
"""

import os
import pathlib
import sys
import time

from kadence.processors.history_processor import HistoryProcessor
from kadence.processors.timer_service import TimerService


def _stall(original):
    def on_revoke(self, consumer, partitions, *args):
        if partitions:
            pathlib.Path(os.environ["KADENCE_TEST_REVOKE_MARKER"]).write_text(
                " ".join(str(tp.partition) for tp in partitions)
            )
            while True:
                time.sleep(3600)
        return original(self, consumer, partitions, *args)

    return on_revoke


HistoryProcessor._on_revoke = _stall(HistoryProcessor._on_revoke)
TimerService._on_revoke = _stall(TimerService._on_revoke)

if __name__ == "__main__":
    from kadence.cli.main import main

    main(sys.argv[1:])
