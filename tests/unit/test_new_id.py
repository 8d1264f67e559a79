"""``new_id``: unique, UUID-shaped IDs for events, commands and requests."""

from __future__ import annotations

import os
import uuid

from kadence.topics.records import new_id


def test_ids_are_unique_uuid4_strings():
    ids = [new_id() for _ in range(100_000)]
    assert len(set(ids)) == len(ids)
    for i in ids[:100] + ids[-100:]:
        assert uuid.UUID(i).version == 4 and str(uuid.UUID(i)) == i


def test_a_forked_child_draws_a_new_random_part():
    parent = new_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, new_id().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    os.close(read)
    os.close(write)
    assert child[:24] != parent[:24]
    assert new_id() != child
